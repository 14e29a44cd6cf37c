#!/usr/bin/env bash
# Epilogue Visitor Trees on the GPU machine: every accepted corpus program (test/evt/corpus) as a
# complete GEMM (`coil evt --emit-kernel`), compiled with nvcc for sm_90a and sm_80 in parallel,
# then run on the device; each run checks its outputs against a host reference and prints its
# max relative error. Ends with a table and exit status 0 when everything compiled and passed.
#
#   scripts/evt-gpu-check.sh prepare   # where coil is built: emits the .cu files and copies the
#                                      # CUTLASS headers (pip nvidia-cutlass) into build-evt/
#   scripts/evt-gpu-check.sh compile   # on the GPU machine (carry build-evt): parallel nvcc; skips
#                                      # programs already compiled, so it resumes across calls
#   scripts/evt-gpu-check.sh report    # runs every compiled program and prints the table
#   scripts/evt-gpu-check.sh run       # compile + report
#   scripts/evt-gpu-check.sh all       # prepare + compile + report
#   scripts/evt-gpu-check.sh cutlass-prepare  # here: CUTLASS's Python packages (cutlass_cppgen,
#                                      # cutlass_library without its sources, pycute, networkx
#                                      # fallback) and the cp312 cuda-python wheels (WHEELS, default
#                                      # /tmp/whl312) into build-evt/cutlass-py, headers as prepare
#   scripts/evt-gpu-check.sh cutlass-run      # on the GPU machine (carry build-evt/cutlass and
#                                      # build-evt/cutlass-py): the corpus through CUTLASS's own
#                                      # Python flow (trace, plan.run) on the GPU, every output
#                                      # compared with a reference (test/evt/cutlass_run.py);
#                                      # resumable; results and the table into EVT_RESULTS
#
# Environment: COIL (default build/bin/coil), JOBS (default nproc), OUT (default build-evt),
# ARCHS (default "sm90 sm80"), NVCC (default nvcc or /usr/local/cuda/bin/nvcc), BUDGET (seconds
# after which `compile` stops; unfinished programs compile on the next call; default 540),
# ONLY (a grep pattern over program names), CUTLASS_OUTPUTS=0 (skip compiling CUTLASS's tracer
# outputs). Cost: an sm_90a program takes about 60-90 s of one core, an sm_80 one about 30 s.
# sm_80 binaries carry PTX too (compute_80), so they also run on an H100/H200 through the JIT.
set -uo pipefail
cd "$(dirname "$0")/.."
MODE=${1:-all}
COIL=${COIL:-build/bin/coil}
OUT=${OUT:-build-evt}
JOBS=${JOBS:-$(nproc)}
ARCHS=${ARCHS:-"sm90 sm80"}
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
CORPUS=test/evt/corpus

prepare() {
  [ -x "$COIL" ] || { echo "evt-gpu-check: $COIL not built (ninja -C build coil)"; exit 2; }
  mkdir -p "$OUT/src" "$OUT/cutlass"
  rm -f "$OUT"/src/*.cu
  local src
  src=$(python3 -c 'import cutlass_library, os; print(os.path.join(os.path.dirname(cutlass_library.__file__), "source"))' 2>/dev/null)
  if [ -n "$src" ] && [ -f "$src/include/cutlass/cutlass.h" ]; then
    rm -rf "$OUT/cutlass/include" "$OUT/cutlass/util"
    cp -r "$src/include" "$OUT/cutlass/include"
    cp -r "$src/tools/util/include" "$OUT/cutlass/util"
  elif [ ! -f "$OUT/cutlass/include/cutlass/cutlass.h" ]; then
    echo "evt-gpu-check: CUTLASS headers not found (pip install nvidia-cutlass)"; exit 2
  fi
  local n=0
  for f in "$CORPUS"/*.py; do
    local name args
    name=$(basename "$f" .py)
    for arch in $ARCHS; do
      local exp
      exp=$(sed -n "s/^# expect $arch: *//p" "$f" | head -1)
      [ -n "$exp" ] || exp=$(sed -n 's/^# expect: *//p' "$f" | head -1)
      [ "$exp" = accept ] || continue
      args=$(sed -n 's/^# args: *//p' "$f" | head -1)
      case " $args " in *" --shape "*) ;; *) args="--shape 256,512 $args" ;; esac
      # shellcheck disable=SC2086
      if "$COIL" evt "$f" --arch "$arch" --emit-kernel $args -o "$OUT/src/$name.$arch.cu" 2>"$OUT/src/$name.$arch.emit.log"; then
        n=$((n + 1))
      else
        echo "evt-gpu-check: emit failed: $name $arch: $(cat "$OUT/src/$name.$arch.emit.log")"
      fi
    done
  done
  echo "evt-gpu-check: prepared $n programs in $OUT/src and CUTLASS headers in $OUT/cutlass"
  # The same corpus through CUTLASS's own Python tracer, wrapped in GEMMs (compile-only).
  if (cd "${TMPDIR:-/tmp}" && python3 -c "import cutlass_cppgen") >/dev/null 2>&1; then
    python3 test/evt/cutlass_compare.py --coil "$COIL" --markdown --emit-cu "$OUT/src" >"$OUT/cutlass-compare.md" 2>&1 &&
      echo "evt-gpu-check: CUTLASS tracer outputs in $OUT/src/*-cutlass.*.cu; table in $OUT/cutlass-compare.md"
  fi
}

compile_one() { # file.cu -> file.bin, log in file.nvcc.log
  local cu=$1 arch gencode
  arch=${cu%.cu}; arch=${arch##*.}
  if [ "$arch" = sm90 ]; then gencode="-gencode arch=compute_90a,code=sm_90a"
  else gencode="-gencode arch=compute_80,code=[sm_80,compute_80]"; fi
  local t0=$SECONDS out=(-o "${cu%.cu}.bin" -lcuda)
  case "$cu" in *-cutlass.*) out=(-c -o "${cu%.cu}.o") ;; esac  # CUTLASS's tracer output: no main
  # shellcheck disable=SC2086
  if "$NVCC" -std=c++17 $gencode -O2 -DNDEBUG --expt-relaxed-constexpr -I"$OUT/cutlass/include" \
      -I"$OUT/cutlass/util" -x cu "$cu" "${out[@]}" >"${cu%.cu}.nvcc.log" 2>&1; then
    echo "compiled $((SECONDS - t0))" >"${cu%.cu}.status"
  else
    echo "nocompile $((SECONDS - t0))" >"${cu%.cu}.status"
  fi
}
export -f compile_one
export NVCC OUT

compile() {
  ls "$OUT"/src/*.cu >/dev/null 2>&1 || { echo "evt-gpu-check: nothing prepared in $OUT/src"; exit 2; }
  [ -x "$NVCC" ] || { echo "evt-gpu-check: nvcc not found"; exit 2; }
  local todo=() cu
  for cu in "$OUT"/src/*.cu; do
    [ -n "${ONLY:-}" ] && ! basename "$cu" | grep -q -- "$ONLY" && continue
    case "$cu" in *-cutlass.*) [ "${CUTLASS_OUTPUTS:-1}" = 0 ] && continue ;; esac
    [ -f "${cu%.cu}.status" ] || todo+=("$cu")
  done
  local t0=$SECONDS
  printf '%s\n' "${todo[@]}" | timeout "${BUDGET:-540}" xargs -r -P "$JOBS" -I{} bash -c 'compile_one "$@"' _ {}
  local left=0
  for cu in "${todo[@]}"; do [ -f "${cu%.cu}.status" ] || left=$((left + 1)); done
  echo "evt-gpu-check: compiled ${#todo[@]} - $left programs in $((SECONDS - t0)) s with $JOBS jobs; $left left for the next call"
}

report() {
  local total=0 ok=0 pending=0 cut_total=0 cut_ok=0
  printf '%-40s %-5s %-10s %-6s %-5s %s\n' program arch compile secs run "max rel err (per output)"
  for cu in "$OUT"/src/*.cu; do
    local base=${cu%.cu} name arch st secs res errs
    name=$(basename "$base"); arch=${name##*.}; name=${name%.*}
    [ -n "${ONLY:-}" ] && ! echo "$name.$arch" | grep -q -- "$ONLY" && continue
    local iscut=0
    case "$name" in *-cutlass) iscut=1 ;; esac
    if [ $iscut = 1 ]; then cut_total=$((cut_total + 1)); else total=$((total + 1)); fi
    if [ ! -f "$base.status" ]; then
      pending=$((pending + 1))
      printf '%-40s %-5s %-10s\n' "$name" "$arch" pending
      continue
    fi
    read -r st secs <"$base.status"
    res=-; errs=
    if [ "$st" = compiled ] && [ ! -f "$base.bin" ]; then
      res=n/a; errs="(CUTLASS tracer output: compile check only)"
    elif [ "$st" = compiled ]; then
      if timeout 300 "$base.bin" >"$base.run.log" 2>&1; then res=PASS; else res=FAIL; fi
      errs=$(grep -o 'output [^:]*: max rel err [^ ]*' "$base.run.log" | sed 's/output //; s/max rel err //' | tr '\n' ' ')
      [ -n "$errs" ] || errs=$(tail -1 "$base.run.log")
    fi
    [ $iscut = 1 ] && [ "$st" = compiled ] && cut_ok=$((cut_ok + 1))
    [ "$res" = PASS ] && ok=$((ok + 1))
    printf '%-40s %-5s %-10s %-6s %-5s %s\n' "$name" "$arch" "$st" "$secs" "$res" "$errs"
  done
  echo "evt-gpu-check: coil: $ok of $total programs compiled and matched the host reference ($pending not compiled yet)"
  [ "$cut_total" -gt 0 ] && echo "evt-gpu-check: CUTLASS tracer: $cut_ok of $cut_total emitted programs compiled"
  for cu in "$OUT"/src/*.cu; do
    local base=${cu%.cu}
    case "$base" in *-cutlass.*) continue ;; esac
    if [ -f "$base.status" ] && grep -q nocompile "$base.status"; then
      echo "---- $(basename "$base"): nvcc errors (first lines)"
      grep -m 8 'error' "$base.nvcc.log"
    fi
  done
  [ "$ok" = "$total" ]
}

headers() { # CUTLASS headers from pip nvidia-cutlass into $OUT/cutlass (include, util)
  local src
  src=$(cd /tmp && python3 -c 'import cutlass_library, os; print(os.path.join(os.path.dirname(cutlass_library.__file__), "source"))' 2>/dev/null)
  if [ -n "$src" ] && [ -f "$src/include/cutlass/cutlass.h" ]; then
    rm -rf "$OUT/cutlass/include" "$OUT/cutlass/util"
    mkdir -p "$OUT/cutlass"
    cp -r "$src/include" "$OUT/cutlass/include"
    cp -r "$src/tools/util/include" "$OUT/cutlass/util"
  elif [ ! -f "$OUT/cutlass/include/cutlass/cutlass.h" ]; then
    echo "evt-gpu-check: CUTLASS headers not found (pip install nvidia-cutlass)"; exit 2
  fi
}

cutlass_prepare() {
  local py="$OUT/cutlass-py" site wheels=${WHEELS:-/tmp/whl312}
  [ -f "$OUT/cutlass/include/cutlass/cutlass.h" ] || headers
  site=$(cd /tmp && python3 -c 'import cutlass_cppgen, os; print(os.path.dirname(os.path.dirname(cutlass_cppgen.__file__)))') ||
    { echo "evt-gpu-check: cutlass_cppgen not installed here (pip install nvidia-cutlass)"; exit 2; }
  rm -rf "$py" && mkdir -p "$py/pkgs" "$py/fallback" "$py/whl"
  local x='--exclude=__pycache__ --exclude=tests'
  # shellcheck disable=SC2086
  tar -C "$site" $x --exclude=cutlass_library/source -cf - cutlass_cppgen cutlass_library pycute | tar -C "$py/pkgs" -xf -
  # shellcheck disable=SC2086
  tar -C "$site" $x -cf - networkx | tar -C "$py/fallback" -xf -
  cp "$wheels"/cuda_bindings-*cp312*.whl "$wheels"/cuda_pathfinder-*.whl "$py/whl/" ||
    { echo "evt-gpu-check: cp312 cuda-bindings / cuda-pathfinder wheels not found in $wheels"; exit 2; }
  echo "evt-gpu-check: CUTLASS Python flow in $py ($(du -sh "$py" | cut -f1)), headers in $OUT/cutlass ($(du -sh "$OUT/cutlass" | cut -f1))"
}

cutlass_run() {
  local py="$OUT/cutlass-py" root="$OUT/cutlass-root" res=${EVT_RESULTS:-$OUT/cutlass-run}
  export PYTHONDONTWRITEBYTECODE=1
  [ -d "$py/pkgs/cutlass_cppgen" ] || { echo "evt-gpu-check: $py missing (cutlass-prepare, then carry it)"; exit 2; }
  [ -f "$OUT/cutlass/include/cutlass/cutlass.h" ] || { echo "evt-gpu-check: $OUT/cutlass headers missing"; exit 2; }
  # a wheel is a zip: unpacked, it imports (no pip needed); outside cutlass-py, which is carried
  local site="$OUT/cutlass-site"
  if [ ! -d "$site/cuda/bindings" ]; then
    python3 - "$py" "$site" <<'PYEOF' || exit 2
import glob, os, sys, zipfile
for w in sorted(glob.glob(os.path.join(sys.argv[1], "whl", "*.whl"))):
    zipfile.ZipFile(w).extractall(sys.argv[2])
PYEOF
  fi
  # CUTLASS_PATH with the layout cutlass_cppgen expects (include/, tools/util/include/)
  mkdir -p "$root/tools/util"
  ln -sfn "$(cd "$OUT/cutlass" && pwd)/include" "$root/include"
  ln -sfn "$(cd "$OUT/cutlass" && pwd)/util" "$root/tools/util/include"
  local pp
  pp="$(cd "$site" && pwd):$(cd "$py" && pwd)/pkgs"
  (cd /tmp && python3 -c 'import networkx' >/dev/null 2>&1) || pp="$pp:$(cd "$py" && pwd)/fallback"
  mkdir -p "$res" "$OUT/cutlass-run"
  CUTLASS_PATH="$(cd "$root" && pwd)" PYTHONPATH="$pp${PYTHONPATH:+:$PYTHONPATH}" \
    python3 test/evt/cutlass_run.py --out "$OUT/cutlass-run" --jobs "$JOBS" --budget "${BUDGET:-480}" \
    ${ONLY:+--only "$ONLY"} ${DRY:+--dry "$DRY"} | tee "$OUT/cutlass-run/run.log"
  local rc=${PIPESTATUS[0]}
  if [ "$(cd "$res" && pwd)" != "$(cd "$OUT/cutlass-run" && pwd)" ]; then
    cp "$OUT/cutlass-run/cutlass-run.json" "$OUT/cutlass-run/cutlass-compare.md" "$OUT/cutlass-run/run.log" "$res/"
    tar -C "$OUT/cutlass-run" -czf "$res/cutlass-run-results.tgz" results
  fi
  return "$rc"
}

case "$MODE" in
prepare) prepare ;;
compile) compile ;;
report) report ;;
run) compile && report ;;
all) prepare && compile && report ;;
cutlass-prepare) cutlass_prepare ;;
cutlass-run) cutlass_run ;;
*) echo "usage: $0 prepare|compile|report|run|all|cutlass-prepare|cutlass-run"; exit 2 ;;
esac
