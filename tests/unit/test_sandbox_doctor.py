"""``sandboxharness doctor``: real probes, JSON shape, always exit 0."""

from __future__ import annotations

import json

import typer
from typer.testing import CliRunner

from sandboxharness.cli.doctor_cmd import doctor


def _app() -> typer.Typer:
    app = typer.Typer()
    app.command()(doctor)

    @app.command()
    def _other() -> None:  # a second command keeps typer from flattening the app
        """Unused."""

    return app


def test_doctor_json_reports_every_layer_and_the_auto_choice() -> None:
    result = CliRunner().invoke(_app(), ["doctor", "--json"])
    assert result.exit_code == 0, result.output
    rep = json.loads(result.stdout)
    for key in ("namespaces", "hardened_sandbox", "seccomp", "cgroups", "docker_engine",
                "runsc", "gpu", "cuda_in_sandbox", "tools", "auto_backend", "date",
                "kernel"):
        assert key in rep
    assert rep["auto_backend"] in ("process (hardened)", "docker", "process (plain)")
    assert rep["hardened_sandbox"]["ok"] == (rep["auto_backend"] == "process (hardened)")


def test_doctor_table_exits_zero() -> None:
    result = CliRunner().invoke(_app(), ["doctor"])
    assert result.exit_code == 0, result.output
    assert "auto backend" in result.stdout
