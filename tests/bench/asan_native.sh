#!/usr/bin/env bash
# The three C modules (supervisor/_looker.c, supervisor/_steprecords.c, collect/_procstat.c)
# built with AddressSanitizer and UBSan into a copy of the package in a temporary folder, and
# run there: the native tests (tests/unit/*/test_native_*.py) and a short fuzz of each function
# against its Python twin (tests/bench/fuzz_native.py). A memory error or undefined behaviour
# stops the run with the sanitizer's report and a non-zero status. Nothing of the checkout's
# own build is touched.
#
#   tests/bench/asan_native.sh [SECONDS_OF_FUZZ_EACH]     (default 3; needs gcc or clang)
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
python=${PYTHON:-$repo/.venv/bin/python}
seconds=${1:-3}
cc=${CC:-cc}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The package's Python (its own built modules left out), with the sanitized ones beside it.
cp -r neurotui "$work/neurotui"
find "$work/neurotui" \( -name '*.so' -o -name __pycache__ \) -prune -exec rm -rf {} +
include=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
suffix=$("$python" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
flags=(-shared -fPIC -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined
       -fno-sanitize-recover=all -Wall -Wextra -Wno-unused-parameter
       -Wno-missing-field-initializers -Werror)
for module in supervisor/_looker supervisor/_steprecords collect/_procstat; do
  "$cc" "${flags[@]}" -I"$include" "neurotui/$module.c" -o "$work/neurotui/$module$suffix" \
    -lpthread
  echo "built $module$suffix with -fsanitize=address,undefined"
done

# Python itself is not instrumented: its allocations go through malloc (PYTHONMALLOC), where
# AddressSanitizer sees them, and its runtime is loaded first (LD_PRELOAD). Python's own
# allocations are never all freed at exit: no leak report.
export LD_PRELOAD=$("$cc" -print-file-name=libasan.so)
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:print_summary=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export PYTHONMALLOC=malloc
export PYTHONPATH=$work${PYTHONPATH:+:$PYTHONPATH}
export PYTHONDONTWRITEBYTECODE=1
cd "$work"  # (not the checkout: Python puts the current folder first on sys.path)

"$python" - "$work" <<'EOF'
import sys

from neurotui.collect import _procstat
from neurotui.supervisor import _looker, _steprecords

for module in (_looker, _steprecords, _procstat):
    assert module.__file__.startswith(sys.argv[1]), f"not the sanitized build: {module.__file__}"
print("the sanitized modules are the ones imported")
EOF
# (--import-mode=append: the test folders pytest puts on sys.path come after the copy;
# --capture=sys: a sanitizer's report, written to the stderr descriptor, is not swallowed)
"$python" -m pytest -q -p no:cacheprovider --import-mode=append --capture=sys --rootdir "$repo" \
  -c "$repo/pyproject.toml" "$repo/tests/unit/supervisor/test_native_looker.py" \
  "$repo/tests/unit/supervisor/test_native_records.py" \
  "$repo/tests/unit/collect/test_native_procstat.py"
"$python" "$repo/tests/bench/fuzz_native.py" --seconds "$seconds"
echo "asan_native: no sanitizer report"
