"""Kernel-name shortening: readable, bounded, stable, and never merging two different kernels."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fleetbench.profile.names import MAX_SHORT, label, short_name
from fleetbench.profile.ncu.readers import read_report
from testdata import get_test_data_dir, listed

FIXTURES = get_test_data_dir()
LABEL = re.compile(r"^[A-Za-z0-9_:.+\-]{1,48}(~[0-9a-f]{6})?$")


@pytest.mark.parametrize(
    ("full", "short"),
    [
        (
            "void cutlass::Kernel<cutlass::gemm::kernel::Gemm<(int)64>>(cutlass::gemm::kernel::Gemm<(int)64>::Params)",
            "cutlass::Kernel",
        ),
        (
            "void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel<float, (int)4>(int)",
            "distribution_elementwise_grid_stride_kernel",
        ),
        ("naive_gemm(const float *, const float *, float *, int, int, int, float, float)", "naive_gemm"),
        ("unnamed>::saxpy_kernel(float, const float *, float *, int)", "saxpy_kernel"),
        ("Memcpy HtoD (Pageable -> Device)", "Memcpy_HtoD"),
        ("aten::mm", "aten::mm"),
        (
            "ampere_fp16_s16816gemm_fp16_128x256_ldg8_f2f_stages_64x3_nn",
            "ampere_fp16_s16816gemm_fp16_128x256_ldg8_f2f_sta",
        ),
    ],
)
def test_short_names_keep_what_a_person_recognises(full: str, short: str) -> None:
    assert short_name(full) == short


def test_labels_are_stable_bounded_and_keep_template_instances_apart() -> None:
    a = "void cutlass::Kernel<cutlass::gemm::GemmShape<(int)64, (int)64, (int)64>>(Params)"
    b = "void cutlass::Kernel<cutlass::gemm::GemmShape<(int)128, (int)128, (int)32>>(Params)"
    assert short_name(a) == short_name(b)
    assert label(a) != label(b)
    assert label(a) == label(a)  # the same kernel, the same label, in any report
    assert label("aten::mm") == "aten::mm"  # nothing shortened, nothing added
    assert len(label("x" * 500)) <= MAX_SHORT + 7


@pytest.mark.realdata
@pytest.mark.parametrize(
    "report",
    [p for p in listed("ncu-csv", ".csv") if "decode" in p.name] + listed("ncu-rep", ".ncu-rep"),
    ids=lambda p: p.name,
)
def test_every_fixture_kernel_gets_a_valid_label_and_distinct_names_distinct_labels(report: Path) -> None:
    if report.suffix == ".ncu-rep":
        pytest.importorskip("ncu_report", reason="reading .ncu-rep needs NVIDIA's ncu-report package")
    names = {k.name for k in read_report(report).kernels}
    labels = {label(name) for name in names}
    assert all(LABEL.match(value) for value in labels), labels
    assert len(labels) == len(names)
