"""The example programs run (small sizes, in this process), and the README's example commands name them."""

from __future__ import annotations

import re
import runpy
import shlex

import pytest
from docpages import EXAMPLES, REPO_ROOT


def _main(relative: str):
    namespace = runpy.run_path(str(EXAMPLES / relative), run_name="example")
    return namespace["main"]


def test_mnist_trains_on_generated_data(capsys) -> None:
    argv = "--epochs 1 --data synthetic --train-size 256 --test-size 64 --hidden 64 28 10".split()
    assert _main("mnist/train.py")(argv) == 0
    out = capsys.readouterr().out
    before = float(re.search(r"accuracy before training: ([\d.]+)%", out).group(1))
    after = float(re.search(r"accuracy after training: ([\d.]+)%", out).group(1))
    uncompiled = float(re.search(r"uncompiled module \(same parameters\): ([\d.]+)%", out).group(1))
    assert after > before and after == uncompiled, out


def test_mnist_falls_back_to_generated_data_without_torchvision_or_network(capsys, tmp_path) -> None:
    argv = [
        "--data",
        "auto",
        "--data-dir",
        str(tmp_path),
        *"--train-size 64 --test-size 16 --hidden 16 10".split(),
    ]
    try:
        import torchvision  # noqa: F401

        pytest.skip("torchvision imports here: --data auto would try the real download")
    except Exception:
        pass
    assert _main("mnist/train.py")(argv) == 0
    assert "data: generated (real MNIST unavailable" in capsys.readouterr().out


def test_huggingface_tiny_llama(capsys) -> None:
    pytest.importorskip("transformers", reason="transformers is not installed (the `test` extra has it)")
    assert _main("huggingface/tiny_llama.py")(["--layers", "1", "--hidden", "32", "--steps", "2"]) == 0
    out = capsys.readouterr().out
    assert "match eager PyTorch" in out and "matches eager: True" in out, out


def test_thunderfx_compile(capsys) -> None:
    import torch

    try:
        assert _main("thunderfx/compile.py")(["--steps", "2"]) == 0
    finally:
        torch._dynamo.reset()
    out = capsys.readouterr().out
    assert "result matches eager" in out and "thunder_0" in out and "inductor_1" in out, out


def _readme_example_commands() -> list[list[str]]:
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    section = re.search(r"^## Examples\n(.*?)(?=^## |\Z)", readme, flags=re.M | re.S)
    assert section, "README.md has no '## Examples' section"
    lines = re.findall(r"^python (examples/\S+\.py.*?)(?:\s+#.*)?$", section.group(1), flags=re.M)
    return [shlex.split(line) for line in lines]


def test_readme_example_commands_name_existing_programs() -> None:
    commands = _readme_example_commands()
    assert {c[0] for c in commands} >= {
        "examples/mnist/train.py",
        "examples/huggingface/tiny_llama.py",
        "examples/thunderfx/compile.py",
    }
    for command in commands:
        assert (REPO_ROOT / command[0]).is_file(), command


@pytest.mark.slow
@pytest.mark.parametrize("command", _readme_example_commands(), ids=" ".join)
def test_readme_example_commands_run(command, monkeypatch, tmp_path) -> None:
    """The README's commands exactly as written (real sizes: slow; MNIST downloads where it can)."""
    monkeypatch.chdir(REPO_ROOT)
    assert _main(command[0].removeprefix("examples/"))(command[1:]) == 0
