"""What comes in: one pure reading of an event or a comment for every surface.

The intent an event asks for (`intent`: GitHub events, `azure_hooks`: Azure DevOps service
hooks), the comment command grammar (`comment_commands`), the request an accepted command
travels in (`pair_request`), who may see the status pages (`access`), and the one answer a
comment gets when it runs nothing (`answers`).
"""
