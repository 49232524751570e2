"""`make perf`, edge llm row: fleetbench's llama.cpp figures against llama.cpp's own llama-bench.

The same GGUF (the llama3-debug model, q8_0 and f32), the same threads and the same pp/tg lengths:
fleetbench's worker (what `fleetbench edge llm` runs) and llama-bench alternate round by round (A B,
B A, ...). llama-bench is built with CMake from the very sources llama-cpp-python vendors (its sdist,
the version the llm extra pins) as shared libraries without an rpath, and runs on llama-cpp-python's
own libllama/libggml (LD_LIBRARY_PATH): both sides execute the same machine code, so what the row
measures is the suite's own overhead, not the difference between a static and a position-independent
build of llama.cpp. Each side's figure in a round is the median of its repetitions (fleetbench's
tries; llama-bench's own samples_ts, not its mean), and the row is the median over the rounds of each
round's ratio fleetbench / llama-bench: the two measurements of a round ran back to back, so what
slowed the machine then (a neighbour on a shared host swings these short runs by 30 % from minute to
minute) slows both and drops out. It should lie within 10 %: the suite adds no overhead of its own to
what it measures. Each row also gives a 95 % bootstrap interval of that median (scipy), and its verdict
says whether the whole interval lies within 0.9-1.1 ("within"), entirely outside it ("outside"), or
straddles a bound ("undecided": the machine was too noisy for this run to tell).

The same for llama.cpp's Vulkan build (`make setup` installs it where glslc and the Vulkan headers exist):
fleetbench's Vulkan rows (every layer offloaded) against a llama-bench built in that build's own CMake
folder (`-ngl 99`), on the Vulkan wheel's libraries; here that runs on lavapipe, on a lent GPU on its
driver.

PERF_LLM_THREADS sets the thread counts, a comma list (default: 1 and the CPUs this process may use, the
default of `fleetbench edge llm` and of llama-bench). llama-bench is looked for at $LLAMA_BENCH, then
~/.cache/fleetbench/build/llama-bench-shared/bin/llama-bench (CPU), and in the Vulkan build's folder;
`--build` builds the missing ones there (minutes). PERF_LLM_BACKENDS limits the builds (cpu,vulkan).
Not a test: prints the table and exits 0 (also when llama-bench or llama-cpp-python is missing: it says why).
"""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from importlib.metadata import version
from pathlib import Path

import numpy as np
import perfkit
from rich.console import Console
from rich.table import Table
from scipy.stats import bootstrap

ROUNDS = perfkit.rounds(full=21, quick=7)
REPEATS = 5  # tries of fleetbench's worker, repetitions of llama-bench (-r), per round
PP, TG = 128, 32
TARGET = "0.9-1.1"
CACHE = Path.home() / ".cache" / "fleetbench"
BUILD = CACHE / "build" / "llama-bench-shared"
console = Console()


def llama_bench(backend: str = "cpu") -> Path | None:
    """The llama-bench binary of `backend`'s build, or None."""
    if backend == "vulkan":
        build = vulkan_build()
        binary = build / "bin" / "llama-bench" if build else None
        return binary if binary and binary.is_file() else None
    for candidate in (os.environ.get("LLAMA_BENCH"), BUILD / "bin" / "llama-bench"):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


def vulkan_build() -> Path | None:
    """The CMake folder the installed Vulkan wheel was built in (scripts/setup.sh notes it), or None."""
    from fleetbench.edge.llm.backends import vulkan_site

    noted = vulkan_site() / ".fleetbench-build"
    build = Path(noted.read_text().strip()) if noted.is_file() else None
    return build if build and (build / "CMakeCache.txt").is_file() else None


def build_vulkan_llama_bench(build: Path) -> Path:
    """llama-bench in the Vulkan wheel's own CMake folder: its tools switched on, only llama-bench (and the
    common library it links) compiled; ggml and llama are the wheel's objects, already built."""
    subprocess.run(["cmake", "-DLLAMA_BUILD_TOOLS=ON", str(build)], check=True)  # the folder: its cached source
    subprocess.run(["cmake", "--build", str(build), "--target", "llama-bench", "-j", str(os.cpu_count())], check=True)
    binary = next(build.rglob("bin/llama-bench"), None)
    if binary is None:
        raise RuntimeError(f"cmake built no llama-bench under {build}")
    return binary


def build_llama_bench() -> Path:
    """Build llama-bench from llama-cpp-python's sdist (the pinned version's vendored llama.cpp)."""
    pin = f"llama-cpp-python=={version('llama_cpp_python')}"
    src = CACHE / "src"
    src.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-binary", ":all:", "--no-deps", pin, "-d", str(src)],
        check=True,
    )
    archive = next(src.glob(f"llama_cpp_python-{pin.split('==')[1]}.tar.gz"))
    with tarfile.open(archive) as tar:
        tar.extractall(src, filter="data")
    vendored = src / archive.name.removesuffix(".tar.gz") / "vendor" / "llama.cpp"
    # Shared, as llama-cpp-python's CMakeLists builds them, and no rpath: at run time the binary can only find
    # the wheel's libraries (wheel_libraries); GGML_NATIVE=OFF as scripts/setup.sh builds the wheel
    flags = ["-DCMAKE_BUILD_TYPE=Release", "-DGGML_NATIVE=OFF", "-DLLAMA_CURL=OFF", "-DBUILD_SHARED_LIBS=ON",
             "-DCMAKE_SKIP_RPATH=ON"]  # fmt: skip
    subprocess.run(["cmake", "-S", str(vendored), "-B", str(BUILD), "-G", "Ninja", *flags], check=True)
    subprocess.run(["cmake", "--build", str(BUILD), "--target", "llama-bench", "-j", str(os.cpu_count())], check=True)
    return BUILD / "bin" / "llama-bench"


def wheel_libraries(backend: str = "cpu") -> Path:
    """The folder of the libllama and libggml that llama-cpp-python loads (and fleetbench's worker runs)."""
    if backend == "vulkan":
        from fleetbench.edge.llm.backends import vulkan_site

        return (vulkan_site() / "llama_cpp" / "lib").resolve()
    import llama_cpp

    return Path(llama_cpp.__file__).resolve().parent / "lib"


def on_wheel_libraries(binary: Path, backend: str = "cpu") -> dict[str, str] | str:
    """llama-bench's environment with the wheel's libraries first, or why the binary would load another
    libllama (a static build, or one with an rpath): the row would then compare two builds, not two callers.
    The binary's own folder comes after them, for what only llama-bench has (its impl and common libraries)."""
    libraries = wheel_libraries(backend)
    folders = (str(libraries), str(binary.parent), os.environ.get("LD_LIBRARY_PATH"))
    found = os.pathsep.join(filter(None, folders))
    env = {**os.environ, "LD_LIBRARY_PATH": found}
    linked = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, env=env, check=False).stdout
    lib = next((line.split("=>")[1].split("(")[0].strip() for line in linked.splitlines() if "libllama.so" in line), "")
    if not lib or Path(lib).resolve().parent != libraries:
        return (
            f"{binary} loads libllama from {lib or 'nowhere (a static build)'}, not from {libraries}: "
            f"rebuild it with --build (shared libraries, no rpath)"
        )
    return env


def ours(path: Path, threads: int, scratch: Path, backend: str = "cpu") -> tuple[float, float]:
    """(pp, tg) tokens/s of one fleetbench measurement: the edge llm worker, one try after its warm-up."""
    from fleetbench.edge.llm.job import _run_worker

    spec = {
        "runtime": "llama.cpp",
        "backend": backend,
        "gpu_layers": 0 if backend == "cpu" else -1,
        "path": str(path),
        "mmap": True,
        "threads": threads,
        "context": PP + TG + 8,
        "prompt": [(i * 37) % 2048 for i in range(PP)],
        "gen_tokens": TG,
        "agree_tokens": 1,
        "min_tries": REPEATS,
        "max_tries": REPEATS,
        "cv_target": 1.0,
        "logits_out": str(scratch / "logits.npy"),
        "decode_check_tokens": 1,
        "decode_logits_out": str(scratch / "decode_logits.npy"),
    }
    out = _run_worker(spec, scratch)
    if not out.get("ok"):
        raise RuntimeError(str(out.get("error")))
    return statistics.median(out["pp_tokens_per_s"]), statistics.median(out["tg_tokens_per_s"])


def theirs(binary: Path, path: Path, threads: int, env: dict[str, str], backend: str = "cpu") -> tuple[float, float]:
    """(pp, tg) tokens/s of llama-bench on the same file: the median of its REPEATS samples (after its own
    warm-up run), both from an empty context as fleetbench's tries; flash attention off, as
    llama-cpp-python's default; on a GPU build every layer offloaded, as fleetbench's default."""
    done = subprocess.run(
        [
            str(binary),
            "-m",
            str(path),
            "-p",
            str(PP),
            "-n",
            str(TG),
            "-t",
            str(threads),
            "-r",
            str(REPEATS),
            "-fa",
            "0",
            "-ngl",
            "0" if backend == "cpu" else "99",
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    tests = json.loads(done.stdout)
    if backend == "vulkan" and not all("Vulkan" in str(t.get("backends", "")) for t in tests):
        raise RuntimeError(f"llama-bench ran on {tests[0].get('backends')}, not on Vulkan")
    pp = next(t["samples_ts"] for t in tests if t["n_prompt"] == PP and t["n_gen"] == 0)
    tg = next(t["samples_ts"] for t in tests if t["n_gen"] == TG and t["n_prompt"] == 0)
    return float(statistics.median(pp)), float(statistics.median(tg))


def interval(ratios: list[float]) -> tuple[float, float]:
    """95 % percentile-bootstrap interval of the median of the rounds' ratios (fixed seed: a rerun on the
    same figures prints the same interval)."""
    if len(set(ratios)) < 2:
        return ratios[0], ratios[0]
    result = bootstrap((np.asarray(ratios),), np.median, confidence_level=0.95, n_resamples=9999,
                       method="percentile", rng=np.random.default_rng(0))  # fmt: skip
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def verdict(low: float, high: float) -> str:
    """Within, outside or undecided against the 0.9-1.1 target."""
    if low >= 0.9 and high <= 1.1:
        return "within"
    if high < 0.9 or low > 1.1:
        return "[red]outside[/]"
    return "[yellow]undecided (noisy)[/]"


def main() -> int:
    """Measure and print the rows."""
    if importlib.util.find_spec("llama_cpp") is None:
        console.print("perf_edge_llm: llama-cpp-python is not installed (the llm extra); no figures")
        perfkit.emit(
            perfkit.skipped(
                "edge llm: llama.cpp / llama-bench tok/s", TARGET, "llama-cpp-python is not installed (the llm extra)"
            )
        )
        return 0
    from fleetbench.config.edge import EdgeLlmConfig
    from fleetbench.edge.llm.gguf_export import export_gguf
    from fleetbench.edge.llm.job import _threads
    from fleetbench.edge.llm.source import build_llama

    # 1 thread, and the default of `fleetbench edge llm` (the CPUs this process may use). On shared cores
    # llama.cpp's spinning thread barriers collapse when another process takes a core (llama-bench tg32
    # here: 500 tok/s on 1 thread, 28 on 2, at load average 9): the rounds alternate so both sides see it.
    default = str(_threads(EdgeLlmConfig()))
    threads = sorted({int(t) for t in os.environ.get("PERF_LLM_THREADS", f"1,{default}").split(",")})
    wanted = os.environ.get("PERF_LLM_BACKENDS", "cpu,vulkan").split(",")
    model = build_llama("llama3-debug", seed=0)
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        paths = {dtype: export_gguf(model, scratch / f"model-{dtype}.gguf", dtype) for dtype in ("q8_0", "f32")}  # type: ignore[arg-type]
        for backend in wanted:
            ready = bench_for(backend)
            if isinstance(ready, str):
                console.print(f"perf_edge_llm: {backend}: {ready}")
                perfkit.emit(perfkit.skipped(f"edge llm: llama.cpp {backend} / llama-bench tok/s", TARGET, ready))
                continue
            for count in threads:
                compare(backend, *ready, paths, count, scratch)
    return 0


def bench_for(backend: str) -> tuple[Path, dict[str, str]] | str:
    """`backend`'s llama-bench and its environment on the wheel's libraries, built with --build where it
    is missing; or why there is none."""
    from fleetbench.edge.llm.backends import missing

    why = missing(backend)
    if why:
        return why
    binary = llama_bench(backend)
    if binary is None and "--build" in sys.argv:
        if backend == "cpu":
            binary = build_llama_bench()
        elif (build := vulkan_build()) is not None:
            binary = build_vulkan_llama_bench(build)
    if binary is None:
        where = BUILD if backend == "cpu" else "the Vulkan build's CMake folder"
        return (
            f"llama-bench is not built: `python scripts/perf_edge_llm.py --build` builds it once in {where} (minutes)"
        )
    env = on_wheel_libraries(binary, backend)
    if isinstance(env, str):
        return env
    from fleetbench.edge.llm.backends import VISIBLE_DEVICES, worker_env

    chosen = (worker_env(backend) or {}).get(VISIBLE_DEVICES)  # the device fleetbench's worker gets (lavapipe)
    return binary, {**env, VISIBLE_DEVICES: chosen} if chosen else env


def compare(
    backend: str, binary: Path, env: dict[str, str], paths: dict[str, Path], threads: int, scratch: Path
) -> None:
    """The rows of one build and thread count: fleetbench and llama-bench alternating round by round."""
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        "?",
    )
    table = Table(
        title=f"fleetbench perf, edge llm: llama.cpp {backend} pp{PP} tg{TG}, {threads} thread{'s' if threads != 1 else ''}, {cpu} (median of {ROUNDS} rounds' ratios)"
    )
    for column in ("row", "ratio", "95 % interval", "fleetbench", "llama-bench", "target 0.9-1.1"):
        table.add_column(column, justify="left" if column == "row" else "right")
    name = "llama.cpp" if backend == "cpu" else f"llama.cpp {backend}"
    for dtype, path in paths.items():
        a: list[tuple[float, float]] = []
        b: list[tuple[float, float]] = []
        for index in range(ROUNDS):  # A B, then B A: drift and other load hit both alike
            if index % 2 == 0:
                a.append(ours(path, threads, scratch, backend))
                b.append(theirs(binary, path, threads, env, backend))
            else:
                b.append(theirs(binary, path, threads, env, backend))
                a.append(ours(path, threads, scratch, backend))
        for phase, i in (("pp", 0), ("tg", 1)):
            mine, ref = statistics.median(x[i] for x in a), statistics.median(x[i] for x in b)
            ratios = [x[i] / y[i] for x, y in zip(a, b, strict=True)]
            low, high = interval(ratios)
            table.add_row(
                f"{dtype} {phase} tok/s, fleetbench / llama-bench",
                f"{statistics.median(ratios):.3f}",
                f"{low:.3f}-{high:.3f}",
                f"{mine:.1f}",
                f"{ref:.1f}",
                verdict(low, high),
            )
            perfkit.emit(
                perfkit.judged(
                    f"edge llm: {name} / llama-bench, {dtype} {phase} tok/s, {threads} thread(s)",
                    statistics.median(ratios),
                    TARGET,
                    f"{mine:.1f} vs {ref:.1f} tok/s, {ROUNDS} alternating rounds, {threads} thread(s)",
                    samples=ratios,
                )
            )
    console.print(table)


if __name__ == "__main__":
    sys.exit(main())
