"""SBUF and PSUM allocation for one kernel: where tiles live, and the capacity rules.

SBUF: a tile takes the same byte range in every partition (the free dimension is the address,
NDOC NKI architecture guides), so capacity is counted in bytes per partition against the usable
figure of the catalogue (``sbuf_usable_partition_bytes``: the runtime keeps the rest). Tiles are
placed first-fit: at the lowest free run (gap) that holds them; the free runs are kept in
order, merged as tiles are freed, so a placement never walks the live tiles. PSUM: 8 banks of
2 KiB per partition; a PSUM tile is one bank.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

from ._errors import PsumBankOverflowError, SbufCapacityError, TileTooLargeError
from ._params import CoreParams

__all__ = ["Memory"]


class Memory:
    """Live SBUF byte ranges and PSUM banks of one kernel.

    Parameters
    ----------
    params : CoreParams
    name_of : callable
        Tile id -> tile name (for the messages).
    """

    def __init__(self, params: CoreParams, name_of: Callable[[int], str]):
        self.params = params
        self.name_of = name_of
        self.sbuf_live: dict[int, tuple[int, int]] = {}  # tile id -> (offset, bytes)
        self.sbuf_in_use = 0  # bytes per partition the live tiles take
        cap = int(params.sbuf_usable_partition_bytes)
        self._gap_at: list[int] = [0]  # free runs of SBUF, by offset ...
        self._gap_size: list[int] = [cap]  # ... and their sizes (bytes per partition)
        self.psum_banks: list[int] = [-1] * int(params.psum_banks)

    def check_partitions(self, space: str, name: str, parts: int) -> None:
        p = self.params
        if parts > p.sbuf_partitions:
            raise TileTooLargeError(
                f"{space} tile {name!r} asks for {parts} partitions; {p.name} has "
                f"{p.sbuf_partitions}. Put the dimension you reduce over or work in parallel on "
                f"partitions in chunks of <= {p.sbuf_partitions}, and the rest on the free dimension."
            )

    def place_sbuf(self, tid: int, name: str, need: int) -> int:
        """Byte offset for ``need`` bytes per partition (first fit), or a teaching error."""
        sizes = self._gap_size
        k = next((j for j, size in enumerate(sizes) if size >= need), -1)
        if k < 0:
            cap = int(self.params.sbuf_usable_partition_bytes)
            self._sbuf_full(name, need, cap, self.sbuf_in_use, len(self.sbuf_live))
        at, size = self._gap_at[k], sizes[k]
        if size == need:
            del self._gap_at[k], sizes[k]
        else:
            self._gap_at[k] = at + need
            sizes[k] = size - need
        self.sbuf_live[tid] = (at, need)
        self.sbuf_in_use += need
        return at

    def _free_sbuf(self, tid: int) -> None:
        """Return a tile's bytes to the free runs, merged with the runs either side."""
        placed = self.sbuf_live.pop(tid, None)
        if placed is None:
            return
        at, size = placed
        self.sbuf_in_use -= size
        starts, sizes = self._gap_at, self._gap_size
        k = bisect.bisect_left(starts, at)
        if k < len(starts) and starts[k] == at + size:  # the run after: absorb it
            size += sizes[k]
            del starts[k], sizes[k]
        if k > 0 and starts[k - 1] + sizes[k - 1] == at:  # the run before: extend it
            sizes[k - 1] += size
        else:
            starts.insert(k, at)
            sizes.insert(k, size)

    def largest_free(self) -> int:
        """Bytes per partition of the largest free run of SBUF (what one new tile can take)."""
        return max(self._gap_size, default=0)

    def _sbuf_full(self, name, need, cap, in_use, count):
        biggest = sorted(self.sbuf_live.items(), key=lambda kv: -kv[1][1])[:3]
        who = ", ".join(f"{self.name_of(t)} {b} B" for t, (_, b) in biggest)
        frag = (
            " (enough in total, but not in one piece: free tiles in a different order)"
            if cap - in_use >= need
            else ""
        )
        raise SbufCapacityError(
            f"SBUF tile {name!r} needs {need} B per partition, but {self.params.name} has "
            f"{cap} B usable per partition and {in_use} B are in use by {count} tiles "
            f"(largest: {who}); {cap - in_use} B available{frag}. Use smaller blocks, fewer "
            f"buffers, or free tiles you no longer need."
        )

    def take_bank(self, tid: int, name: str, free: int) -> int:
        """First of the consecutive free PSUM banks for ``free`` fp32 accumulators per
        partition (one bank, or several where the generation allows), or a teaching error."""
        p = self.params
        need, bank = free * 4, p.psum_bank_bytes
        if free > p.psum_free_max:
            more = (
                " (NeuronCore-v4 lets one tile span several banks.)"
                if p.psum_free_max == bank // 4
                else ""
            )
            raise PsumBankOverflowError(
                f"PSUM tile {name!r} needs {need} B per partition ({free} fp32 accumulators) but a "
                f"PSUM bank of {p.name} holds {bank} B ({bank // 4} fp32) per partition and a tile "
                f"may take at most {p.psum_free_max} fp32. Split the free dimension into tiles of "
                f"<= {p.psum_free_max}.{more}"
            )
        n = -(-need // bank)
        banks = self.psum_banks
        for b in range(len(banks) - n + 1):
            if all(x == -1 for x in banks[b : b + n]):
                banks[b : b + n] = [tid] * n
                return b
        owners = ", ".join(sorted({self.name_of(t) for t in banks if t >= 0}))
        raise PsumBankOverflowError(
            f"PSUM tile {name!r} needs {n} free bank(s) of {p.name}, but its {p.psum_banks} banks "
            f"are taken ({owners}). Free a PSUM tile (ctx.free) once its result is copied to "
            f"SBUF, or reuse one: at most {p.psum_banks} accumulation groups can be in flight."
        )

    def release(self, tid: int, space: str, offset: int) -> None:
        if space == "sbuf":
            self._free_sbuf(tid)
        else:
            self.psum_banks[:] = [-1 if t == tid else t for t in self.psum_banks]
