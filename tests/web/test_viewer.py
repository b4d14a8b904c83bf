"""The viewer contract the pages and the sign-in layer share."""

from __future__ import annotations

from starlette.requests import Request

from app.web.viewer import VIEWER_KEY, Viewer, viewer_of


def _request(scope_extra: dict[str, object]) -> Request:
    return Request({"type": "http", "method": "GET", "path": "/", "headers": [], **scope_extra})


def test_a_request_no_sign_in_layer_decided_sees_nothing() -> None:
    viewer = viewer_of(_request({}))
    assert viewer == Viewer.nobody()
    assert not viewer.signed_in
    assert not viewer.can_read("octo/repo")


def test_a_reader_sees_only_their_repositories_case_insensitively() -> None:
    viewer = viewer_of(_request({VIEWER_KEY: Viewer.reader_of("mona", ["Octo/Repo"])}))
    assert viewer.signed_in
    assert viewer.can_read("octo/repo")
    assert viewer.can_read("OCTO/REPO")
    assert not viewer.can_read("octo/other")


def test_an_operator_sees_every_repository() -> None:
    viewer = Viewer.everyone("ops", operator=True)
    assert viewer.can_read("any/thing")
    assert viewer.operator


def test_something_else_in_the_scope_is_not_a_viewer() -> None:
    assert viewer_of(_request({VIEWER_KEY: "admin"})) == Viewer.nobody()
