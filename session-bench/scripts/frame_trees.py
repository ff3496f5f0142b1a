#!/usr/bin/env python3
"""Counts the Huffman tree descriptions of a zstd file's frames.

Usage:
    frame_trees.py FILE

For every frame, reads the literals section of its first block (RFC 8878, 3.1.1.3.1) and,
when its literals are Huffman-compressed with a tree of their own, the bytes that describe the
tree. Prints the number of frames, the literal block types of first blocks, and how many tree
descriptions are distinct: a decoder builds its decoding table anew for each one, so a file
whose frames each carry a different tree pays that cost once a frame.
"""

import collections
import sys

MAGIC = b"\x28\xb5\x2f\xfd"


def frames(data):
    """Yields, for each frame, the first block's type and its literals section (or None)."""
    pos = 0
    while pos < len(data):
        if data[pos : pos + 4] != MAGIC:
            raise SystemExit(f"frame_trees: no zstd frame at byte {pos}")
        fhd = data[pos + 4]
        p = pos + 5
        single_segment = (fhd >> 5) & 1
        if not single_segment:
            p += 1  # window descriptor
        p += [0, 1, 2, 4][fhd & 3]  # dictionary id
        p += [1 if single_segment else 0, 2, 4, 8][fhd >> 6]  # frame content size
        first = None
        while True:
            header = int.from_bytes(data[p : p + 3], "little")
            p += 3
            last, btype, bsize = header & 1, (header >> 1) & 3, header >> 3
            if first is None:
                first = (btype, p)
            p += 1 if btype == 1 else bsize
            if last:
                break
        if (fhd >> 2) & 1:
            p += 4  # content checksum
        yield first
        pos = p


def tree_description(data, p):
    """The literal block type at `p` and, for a compressed block, its tree description."""
    lit_type = data[p] & 3
    if lit_type != 2:
        return lit_type, None
    size_format = (data[p] >> 2) & 3
    header_len = {0: 3, 1: 3, 2: 4, 3: 5}[size_format]
    q = p + header_len
    first = data[q]
    # FSE-compressed weights: `first` bytes follow; direct weights: 4 bits each.
    length = 1 + first if first < 128 else 1 + ((first - 127) + 1) // 2
    return lit_type, bytes(data[q : q + length])


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    data = open(sys.argv[1], "rb").read()
    count = 0
    kinds = collections.Counter()
    trees = collections.Counter()
    names = {0: "raw", 1: "rle", 2: "compressed", 3: "treeless"}
    for btype, p in frames(data):
        count += 1
        if btype != 2:
            kinds[f"block {['raw', 'rle', 'compressed', 'reserved'][btype]}"] += 1
            continue
        lit_type, tree = tree_description(data, p)
        kinds[f"literals {names[lit_type]}"] += 1
        if tree is not None:
            trees[tree] += 1
    print(f"frames={count}")
    for kind, n in sorted(kinds.items()):
        print(f"{kind}: {n}")
    print(f"tree descriptions: {sum(trees.values())}, distinct: {len(trees)}")


if __name__ == "__main__":
    main()
