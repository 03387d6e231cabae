"""Programs ``test_fusion_writes_fuzz.py`` found failing, kept as explicit examples (fixed, or xfail with
the reason)."""

from __future__ import annotations

from fusion_write_programs import WriteProgram, check_program, counts, transform_disabled


def test_a_view_made_before_the_region_and_read_after_it_keeps_the_copy_out() -> None:
    # Found by the fuzzer: ``a.t()`` and ``a[1:]`` run as ``torch.permute`` and ``torch.narrow`` after
    # claiming, which the alias roots did not know as views; ``a``'s copy was taken into the region
    # making ``v1``, before the matmuls read the views. Fixed in fusion_copy_backs.py (``_memory_shared``).
    for view in ("a.t()", "a[1:]"):
        lines = [f"v0 = {view}", "v1 = a * 2 - b", "v2 = v0 @ b", "a.copy_(v1)"]
        check_program(WriteProgram(["B0", "B1"], [(4, 4), (4, 4)], lines, ["v2", "a"]))


def test_a_transpose_read_by_a_matmul_before_the_inputs_update() -> None:
    # Found by the long run (1 in ~2900 programs) before the same fix: ``b.t()`` runs as
    # ``torch.permute``; ``b``'s copy was taken into the region making ``a + b``, which runs before
    # the matmul reads ``b.t()``, so ``v0`` read the new ``b``.
    lines = [
        "a.add_(b)",
        "v0 = b.t() @ a",
        "v1 = v0[1:]",
        "a[1:].mul_(0.5).add_(a.mean())",
        "b.div_(b.abs() + 1)",
        "a.sub_(b.exp() * 0.1)",
        "v1.view(-1).lerp_(v1.mean(), 0.25)",
    ]
    check_program(WriteProgram(["B0[:2]", "B1[:2]"], [(4, 4), (4, 4)], lines, ["b", "v0"]))


def _refused_calls() -> int:
    return sum(n for key, n in counts["refused"].items() if key.startswith("thunder cannot run"))


def test_inputs_sharing_memory_a_write_through_one_read_through_the_other() -> None:
    # Was a wrong answer (older than the transform, with it disabled too): the trace read ``b`` as
    # memory of its own. The prologue now refuses the call (prologue_write_overlaps.py).
    program = WriteProgram(["B0", "B0.t()"], [(4, 4), (4, 4)], ["a.add_(1)", "v0 = b * 2"], ["v0"])
    before = _refused_calls()
    with transform_disabled():
        check_program(program)
    check_program(program)
    assert _refused_calls() == before + 2


def test_inputs_sharing_memory_writes_reordered_by_the_region() -> None:
    # Was a wrong answer: ``b``'s copy, taken into the region, ran before ``a``'s in-place slice
    # write, which eager makes first. Refused now: ``a`` and ``b`` are views of one base.
    program = WriteProgram(
        ["B0.t()", "B0.view(-1)", "B0.view(-1)"],
        [(4, 4), (4,), (4,)],
        ["a[1:][..., :2] *= 0.25", "b.copy_(b * 2.0)", "v1 = b.clone()", "v2 = a.clone()", "v3 = a @ a.mT"],
        ["c"],
    )
    before = _refused_calls()
    check_program(program)
    assert _refused_calls() == before + 1


def test_view_of_a_twice_transposed_input_after_writes_through_views() -> None:
    # Found by the long run: thunder raised "view size is not compatible with input tensor's size and
    # stride" at ``v3.view(-1)``, where ``v3 = a.t().t()`` is contiguous in eager (``a``: a
    # 2x8 view of a 4x4 base); also with the transform disabled (the refusal is made while tracing).
    # After ``v2[0].mul_(2)``, ``v2``'s value is a transpose of the write-backs' result (a slice write
    # into ``a.t()``, laid out contiguous), and core/layouts.py took ``v3 = v2.t()`` as a view of that
    # value instead of ``a.t().t()``. Fixed there: a view of an updated tensor views the tensor the
    # user's code holds (``Mutations.holders``; tests/integration/test_view_after_writes_through_transposes.py).
    lines = [
        "v2 = a.t()",
        "v2[0].mul_(2)",
        "v3 = v2.t()",
        "v3.t().copy_(v3.t() * 2)",
        "v3.view(-1).mul_(0.5)",
    ]
    program = WriteProgram(["B0.view(2, -1)"], [(4, 4)], lines, ["a"])
    with transform_disabled():
        check_program(program)
    check_program(program)
