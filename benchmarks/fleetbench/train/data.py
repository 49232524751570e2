"""Training batches: the reference workload's random tokens, or byte-level text that exists everywhere.

Sample g of step s is a pure function of (seed, s, g), whatever the number of ranks: rank r of W
takes samples r*B .. r*B+B-1 of the global batch. So the data position is just the step, a
sharded run sees exactly the global batch an unsharded run sees, and a resumed run continues
with the very samples it would have seen.

The text corpus is the Python standard library's own top-level sources (every Python install has
them), read in name order and capped in size: real, learnable text, identical on machines with the
same Python version (the fingerprint in the record and the checkpoint tells).
"""

from __future__ import annotations

import hashlib
import sysconfig
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import torch

from fleetbench.config.train import DataKind
from fleetbench.errors import UserError

CORPUS_CAP_BYTES = 8 * 2**20
CORPUS_MIN_BYTES = 256 * 2**10


@dataclass(frozen=True)
class Corpus:
    """The byte-level text corpus, with a fingerprint that tells whether two machines read the same text."""

    tokens: torch.Tensor  # uint8 bytes
    fingerprint: str  # sha256 prefix of the bytes
    source: str


@cache
def text_corpus() -> Corpus:
    """The standard library's top-level sources, capped at CORPUS_CAP_BYTES (read once per process).

    Raises UserError when fewer than CORPUS_MIN_BYTES of sources are found.
    """
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    chunks: list[bytes] = []
    size = 0
    for path in sorted(stdlib.glob("*.py")):
        try:
            data = path.read_bytes()
        except OSError:
            continue
        chunks.append(data)
        size += len(data)
        if size >= CORPUS_CAP_BYTES:
            break
    blob = b"".join(chunks)[:CORPUS_CAP_BYTES]
    if len(blob) < CORPUS_MIN_BYTES:
        raise UserError(
            f"data=text needs Python's standard library sources under {stdlib} (found "
            f"{len(blob)} bytes of *.py); accepted on this system: train.data=random"
        )
    tokens = torch.frombuffer(bytearray(blob), dtype=torch.uint8)
    return Corpus(tokens, hashlib.sha256(blob).hexdigest()[:16], f"{stdlib}/*.py ({len(blob)} bytes)")


def sample_seed(seed: int, step: int, index: int) -> int:
    """The generator seed of sample `index` of the global batch at `step`: the same on every rank count."""
    digest = hashlib.blake2b(f"{seed}:{step}:{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


class TokenBatches:
    """Yields (inputs, targets) of shape (batch_size, seq_len) for this rank and a given step."""

    def __init__(  # noqa: PLR0913  # seven independent stream parameters; tests build streams from plain values
        self, kind: DataKind, vocab_size: int, seq_len: int, batch_size: int, seed: int, rank: int, device: torch.device
    ) -> None:
        self.kind = kind
        self.vocab_size = vocab_size
        self.seq_len = seq_len
        self.batch_size = batch_size
        self.seed = seed
        self.rank = rank
        self.device = device
        self.corpus = text_corpus() if kind == "text" else None
        if self.corpus is not None and len(self.corpus.tokens) <= seq_len + 1:
            raise UserError(
                f"train.seq_len={seq_len} is longer than the text corpus "
                f"({len(self.corpus.tokens)} bytes); accepted: seq_len < {len(self.corpus.tokens) - 1}"
            )

    def sample(self, step: int, index: int) -> torch.Tensor:
        """Sample `index` of the global batch at `step`: seq_len + 1 token ids, on the CPU."""
        generator = torch.Generator().manual_seed(sample_seed(self.seed, step, index))
        if self.corpus is None:
            return torch.randint(0, self.vocab_size, (self.seq_len + 1,), generator=generator)
        start = int(torch.randint(0, len(self.corpus.tokens) - self.seq_len - 1, (1,), generator=generator))
        return self.corpus.tokens[start : start + self.seq_len + 1].long()

    def batch(self, step: int, micro: int = 0, world: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
        """This rank's (inputs, targets) at `step` on its device; targets are the inputs shifted by one.

        With gradient accumulation, micro-batch `micro` of `world` ranks takes the next `world` x batch_size
        samples of the step's global batch (micro-batch 0 is the batch without accumulation).
        """
        first = (micro * world + self.rank) * self.batch_size
        rows = torch.stack([self.sample(step, first + i) for i in range(self.batch_size)])
        if self.device.type == "cuda":
            rows = rows.pin_memory().to(self.device, non_blocking=True)
        return rows[:, :-1], rows[:, 1:]

    def state(self, next_step: int, global_batch: int) -> dict[str, object]:
        """The data position, saved with every checkpoint and checked on resume."""
        return {
            "kind": self.kind,
            "seed": self.seed,
            "next_step": next_step,
            "global_batch": global_batch,
            "seq_len": self.seq_len,
            "corpus": self.corpus.fingerprint if self.corpus is not None else "",
        }
