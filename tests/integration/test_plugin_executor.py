"""A third-party executor, installed as its own package, is found through its entry point alone.

examples/thunder-example-executor is pip-installed into a fresh virtual environment layered over
this one (so thunder and torch come from here), and a script there asks for it by name.
"""

from __future__ import annotations

import importlib.util
import site
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

SCRIPT = textwrap.dedent(
    """
    import importlib.metadata

    import torch
    import thunder

    entry_points = [ep.name for ep in importlib.metadata.entry_points(group="thunder.executors")]
    assert "example" in entry_points, entry_points
    names = [executor.name for executor in thunder.get_all_executors()]
    assert "example" in names, names

    # listed with its kind and availability, as an operator executor that is no default
    rows = {info.name: info for info in thunder.list_executors()}
    example = rows["example"]
    assert (example.kind, example.available, example.default, example.version) == ("operator", True, False, "0.1")
    assert "example" in str(thunder.executors.list_executors())
    print(thunder.list_executors())

    # a misspelt name lists the plugin among what is available
    try:
        thunder.jit(lambda x: x, executors=["exampel"])
    except ValueError as error:
        assert "available here: " in str(error) and "example" in str(error).split("available here: ")[1], error
    else:
        raise AssertionError("an unknown executor name was accepted")

    fn = lambda x: torch.relu(x) * 2
    x = torch.randn(3, 4)

    jfn = thunder.jit(fn, executors=["example"])
    assert torch.equal(jfn(x), fn(x))
    src = str(thunder.last_traces(jfn)[-1])
    assert "example_relu" in src, src
    print(src)

    # A module calling F.relu(x, inplace=False) (nn.ReLU) goes to the plugin too.
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    jmodel = thunder.jit(model, executors=["example"])
    torch.testing.assert_close(jmodel(x), model(x))
    assert "example_relu" in str(thunder.last_traces(jmodel)[-1])

    # An executor object works as well as its name; the plugin's module is reachable once loaded.
    plugin = thunder.core.executor.get_executor("example")
    jobj = thunder.jit(fn, executors=[plugin])
    assert torch.equal(jobj(x), fn(x)) and "example_relu" in str(thunder.last_traces(jobj)[-1])

    # Installed is not chosen: without asking for it, relu does not go to the plugin.
    default = thunder.jit(fn)
    assert torch.equal(default(x), fn(x))
    default_src = str(thunder.last_traces(default)[-1])
    assert "example_relu" not in default_src, default_src
    assert plugin not in thunder.get_default_executors()
    print("OK")
    """
)


def run(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300)
    print(f"$ {' '.join(command)}\n{result.stdout}{result.stderr}")
    assert result.returncode == 0, f"status {result.returncode}:\n{result.stderr}"
    return result


def make_layered_venv(path: Path) -> Path:
    """A venv that sees this environment's packages, and returns its python.

    ``--system-site-packages`` reaches only the base interpreter's site-packages; when this
    environment is itself a venv (CI, nox) a .pth file adds its site directories too, processing
    their own .pth files so that editable installs of thunder resolve.
    """
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", str(path)], check=True, timeout=300
    )
    python = path / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    parents = dict.fromkeys(
        [*site.getsitepackages(), sysconfig.get_path("purelib"), sysconfig.get_path("platlib")]
    )
    lines = [f"import site; site.addsitedir({parent!r})" for parent in parents]
    (Path(purelib) / "_thunder_parent_environment.pth").write_text("\n".join(lines) + "\n")
    return python


def test_example_executor_plugin(tmp_path: Path, repo_root: Path) -> None:
    if importlib.util.find_spec("hatchling") is None:
        reason = "hatchling is not importable here; it builds the example plugin (--no-build-isolation)"
        print(reason)
        pytest.skip(reason)

    python = make_layered_venv(tmp_path / "venv")
    plugin = repo_root / "examples" / "thunder-example-executor"
    install = [str(python), "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index"]
    run([*install, "--disable-pip-version-check", str(plugin)], cwd=tmp_path)
    result = run([str(python), "-c", SCRIPT], cwd=tmp_path)
    assert result.stdout.rstrip().endswith("OK")
