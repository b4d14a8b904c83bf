"""The card cycle as one object each surface builds from its typed settings.

    cycle = CardCycle.for_checkout(root, host_settings, deps, checkpoint=save)
    await cycle.handle_request(request)           a `/pair <verb>` (App, Action, `pairbot card`)
    await cycle.handle_scope_decision(pull, id)   a scope-decision comment on the card's PR
    await cycle.handle_head_moved(pull, head)     a push to the card's PR branch
    await cycle.tick(batch=None)                  the schedule: one step of one batch

Each surface reads its environment once into its own settings (the App's
`app.web.settings.AppSettings`, the Action's `action.context.ActionContext`, the CLI's
`HostSettings.from_env(os.environ)`) and hands the `HostSettings` part here: no surface writes
variables back into an environment for the cycle to read again. The steps themselves are
`app.cycle.driver`'s functions; this class only binds them to one checkout.

The hosts follow `app.domain.card.binding`: `hosts:` as declared in `.pair/config.yaml`, else where
pairbot runs (`runner`, which the surface read from its environment) and the checkout's
`origin`. The binding is said once through `say`; a card that already ran keeps the binding
stored with its run-state (`card_step.card_hosts` rebinds through `rebind`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path

from app.cycle import driver
from app.cycle.batch_vet import batch_vetter
from app.cycle.pr_opener import HostPrOpener
from app.cycle.state import CardStep, CycleEnv
from app.cycle.work_line_git import GitWorkTree
from app.domain.card.binding import Binding, Resolution, Runner, describe
from app.domain.intake.pair_request import PairRequest
from app.engine.manifest import ProjectConfig, load_project_config
from app.engine.step import EngineDeps, StepResult
from app.hosting import HostSettings, bind_checkout, build_hosts

__all__ = ["CardCycle", "CardStep", "declared_hosts", "project_binding"]


def declared_hosts(project: ProjectConfig) -> dict[str, str]:
    """Only the `hosts:` keys `.pair/config.yaml` writes: a key left out is inferred, not the
    model's default."""
    if "hosts" not in project.model_fields_set:
        return {}
    return {key: getattr(project.hosts, key) for key in sorted(project.hosts.model_fields_set)}


def project_binding(
    root: Path, settings: HostSettings, runner: Runner = "checkout"
) -> tuple[Resolution, HostSettings]:
    """The project's binding where pairbot runs, and the settings completed by the origin."""
    return bind_checkout(declared_hosts(load_project_config(root)), settings, root, runner)


@dataclass(frozen=True)
class CardCycle(CycleEnv):
    """The cycle on one checkout: its hosts, the engine's deps, and the checkpoint that saves.

    A `CycleEnv` itself, so the driver's functions and a test's hand-built hosts work with it
    unchanged; the methods are the entries the surfaces call.
    """

    @classmethod
    def for_checkout(
        cls,
        root: Path,
        hosts: HostSettings,
        deps: EngineDeps,
        *,
        base_branch: str | None = None,
        checkpoint: Callable[[], Awaitable[None]] | None = None,
        runner: Runner = "checkout",
        say: Callable[[str], None] | None = None,
        run_url: str | None = None,
    ) -> CardCycle:
        """The hosts the project binds where pairbot runs, built from `hosts`; the binding is
        said once through `say`; `run_url` (this run's page) is linked from tracking comments.

        A plain batch ticked here (the Action, the App's worker) opens its PR groups on the
        bound code host and records its work on a work line that every step pushes there: a
        runner's working tree is gone after the step, the pushed work line is not.
        """
        resolution, settings = project_binding(root, hosts, runner)
        if say is not None:
            say(describe(resolution))

        def bound_to(resolved: Resolution) -> CardCycle:
            bound = build_hosts(resolved.binding, settings, root)
            repo = getattr(bound.code, "repo", None)  # the local forge pushes to its own repo
            remote = str(repo) if isinstance(repo, Path) else "origin"

            async def push_work(branch: str) -> str:
                return await bound.code.push_branch(root, branch, force=True)

            work = deps.work or GitWorkTree(root, remote=remote, push=push_work)
            return cls(
                root=root,
                hosts=bound,
                deps=replace(
                    deps,
                    pr_opener=deps.pr_opener or HostPrOpener(lambda: bound.code, root),
                    work=work,
                    # A plain batch's steps meet the converge gate a card's do.
                    work_vet=deps.work_vet
                    or (batch_vetter(work) if isinstance(work, GitWorkTree) else None),
                ),
                base_branch=base_branch,
                remote=remote,
                checkpoint=checkpoint,
                resolution=resolved,
                rebind=rebind,
                say=say,
                run_url=run_url,
            )

        def rebind(binding: Binding) -> CardCycle:
            return bound_to(Resolution(binding, "stored with the card's run-state"))

        return bound_to(resolution)

    async def handle_request(self, request: PairRequest) -> CardStep:
        """Apply one accepted command to its card (`driver.handle_request`)."""
        return await driver.handle_request(self, request)

    async def handle_scope_decision(
        self, pull: int, comment: str | None = None
    ) -> CardStep | StepResult:
        """Read back, validate and apply a scope decision on `pull` (`comment`: its id/URL)."""
        return await driver.handle_scope_decision(self, pull, comment)

    async def handle_head_moved(self, pull: int, head: str) -> CardStep | StepResult:
        """Re-review a card whose PR head moved to `head` (not pairbot's own push)."""
        return await driver.handle_head_moved(self, pull, head)

    async def tick(self, batch: str | None = None) -> CardStep | StepResult:
        """One scheduled step: `batch`, or the runnable batch that waited longest."""
        return await driver.tick(self, batch)
