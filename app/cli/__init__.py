"""`pairbot`, the command line: one entry and a module per verb.

    entry       the parser, `run`, `main` (the console script `pairbot = "app.cli:main"`), and
                `VERBS`: which module runs each command, loaded only when that command runs
    failure     the one line and exit code of an expected failure (loaded only on one)
    init        `pairbot init`: the starter .pair/config.yaml
    validate    `pairbot validate`: the files and the agents they configure
    doctor/     `pairbot doctor` (its verb: doctor.diagnose): this machine against the settings
    demo        `pairbot demo` and `python -m app.cli.demo DIR`: the bundled example
    serve       `pairbot serve`: the App
    status      `pairbot batch status` of a plain batch; status_card: of a card's batch
    batch       `pairbot batch report`, the human verbs and `rerun-proof`: journal writes
    steps       `pairbot batch apply` and the headless `propose` / `apply` / `verify`
    card        `pairbot card N …`, `pairbot card new`, `pairbot tick`: the card cycle
    report      `pairbot report cohort`
    deps        the engine's deps every step-running verb builds

Each verb's module imports what it needs at its top and nothing the others need, so what a
command costs to start is what its module imports (tests/cli/test_cli_imports.py and
tests/packaging/test_import_cost.py hold the light ones to it).
"""

from app.cli.entry import main, run

__all__ = ["main", "run"]
