#!/usr/bin/env bash
# Short fuzzing pass for CI: builds every cargo-fuzz target and runs each for FUZZ_SECONDS
# (default 20; FUZZ_DEV=1 for an unoptimised build) starting from its committed corpus. New inputs go to a scratch directory, so
# the committed corpora do not change; a crash fails the script and leaves the input under
# fuzz/artifacts/<target>/. See RELIABILITY.md, "Fuzzing".
#
# cargo-fuzz needs nightly compiler flags; RUSTC_BOOTSTRAP=1 lets the stable toolchain take them.
set -euo pipefail
cd "$(dirname "$0")"

# Without cargo-fuzz the pass cannot run, and that fails: only FUZZ_OPTIONAL=1 turns it into a
# skip (printed), for machines that cannot install it.
if ! cargo fuzz --version >/dev/null 2>&1; then
    if [ "${FUZZ_OPTIONAL:-0}" = 1 ]; then
        echo "SKIPPED fuzzing: cargo-fuzz not installed (FUZZ_OPTIONAL=1)"
        exit 0
    fi
    echo "fuzz: cargo-fuzz is not installed (cargo install cargo-fuzz --locked); set FUZZ_OPTIONAL=1 to skip" >&2
    exit 1
fi

export RUSTC_BOOTSTRAP=1
seconds="${FUZZ_SECONDS:-20}"
# The sanitizer adds nothing for this code (no unsafe) and slows building and running.
flags=(--sanitizer none)
# FUZZ_DEV=1 builds without optimisation: a short smoke pass then spends less time compiling
# than it would save in executions.
if [ "${FUZZ_DEV:-0}" = 1 ]; then
    flags+=(--dev)
fi

start=$(date +%s)
cargo fuzz build "${flags[@]}"
built=$(date +%s)
echo "fuzz: built every target in $((built - start)) s"

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for target in $(cargo fuzz list); do
    if [ ! -d "corpus/$target" ]; then
        echo "fuzz: corpus/$target is missing" >&2
        exit 1
    fi
    mkdir -p "$scratch/$target"
    echo "fuzz: $target for ${seconds} s"
    log="$scratch/$target.log"
    if ! cargo fuzz run "${flags[@]}" "$target" "$scratch/$target" "corpus/$target" -- \
        -max_total_time="$seconds" -timeout=10 -print_final_stats=1 >"$log" 2>&1; then
        tail -n 60 "$log" >&2
        echo "fuzz: $target FAILED (the input is under fuzz/artifacts/$target/)" >&2
        exit 1
    fi
    grep -E '^Done [0-9]+ runs' "$log" || tail -n 3 "$log"
done
echo "fuzz: done in $(($(date +%s) - start)) s (build $((built - start)) s)"
