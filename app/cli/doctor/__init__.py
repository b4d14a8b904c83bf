"""`pairbot doctor`: is this machine ready to run the agents the project is configured for?

Three layers, so the decisions are testable without this machine having any agent installed:

    needs.plan(profiles)              pure: what the resolved settings need (agents per locus,
                                      the agentCommand binary, a Docker engine, remote servers)
    probes.gather(needs, probes)      the shell: PATH look-ups, `docker info`, `GET /is_alive`,
                                      each through an injected callable (`Probes`)
    checks.build_checks(needs, facts) pure: one `Check` per item, ok / warn / fail with a
                                      remedy; `isolation_checks` for who the agent runs as

`diagnose` (the verb's module) puts them together over `model`'s values. A check fails only
when something the configured settings need is missing or unreachable, so `Report.exit_code`
is 0 exactly when nothing the settings need fails. Everything else that is missing is a
warning: an agent binary nobody configured, a Docker engine when no batch uses the docker
locus, an agent that runs inside a docker or remote locus (this machine cannot see it).

Each agent binary found on PATH is asked its `--version`, which is compared with the version
pairbot supports (`app.runtime.supported`): another version is a warning naming both, since
its flags may differ from the ones the adapters were checked against. The agent binaries come
from the one registry in `app.runtime.adapters`, so doctor and the spawn cannot drift.
"""
