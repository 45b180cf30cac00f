#!/usr/bin/env bash
# The whole test suite as CI runs it: lint, then each test tier as a separate step.
#
#   tests/run_tiers.sh                 # lint, unit, spark, system, spark35
#   tests/run_tiers.sh unit spark      # only these steps, in this order
#   PYTEST_ARGS="-x" tests/run_tiers.sh unit
#   SPARK35_PINS="pyspark==3.5.0 pandas==1.5.3 numpy==1.23.5 pyarrow==14.0.1" \
#       tests/run_tiers.sh spark35     # the Spark 3.5 tier with 15.4 LTS's libraries
#
# Steps: lint (ruff and mypy as configured in pyproject.toml), unit (fast, Spark-free), spark
# (the session-scoped local SparkSession), system (cluster, kill -9, Spark Connect,
# spark-submit), spark35 (a second venv, .venv35, set up like a Databricks 16.4 LTS
# runtime: the install check and tests/test_spark35.py + tests/test_compat.py under
# PySpark 3.5, compared bit for bit with Spark 4's side computed first under $PYTHON;
# docs/support.md). The tiers are assigned in tests/conftest.py. Every step prints a header, one
# line per test, its slowest tests and its elapsed time; a summary table closes the run. The
# exit status is non-zero if any step failed (the later steps still run).
# Python: $PYTHON, else the interpreter of an active virtual environment, else python3.
set -uo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-$(command -v python || command -v python3)}
export PYSPARK_PYTHON=${PYSPARK_PYTHON:-$PY}
export PYSPARK_DRIVER_PYTHON=${PYSPARK_DRIVER_PYTHON:-$PYSPARK_PYTHON}
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(lint unit spark system spark35)
for step in "${steps[@]}"; do
    case $step in
        lint | unit | spark | system | spark35) ;;
        *) echo "unknown step '$step' (lint, unit, spark, system, spark35)" >&2; exit 2 ;;
    esac
done

names=() codes=() times=() lines=()

header() {
    printf '\n%s\n== %s\n%s\n' "$(printf '=%.0s' {1..78})" "$1" "$(printf '=%.0s' {1..78})"
}

run_lint() {
    local rc=0
    echo "+ ruff check vmi_spark jobs tests"
    "$PY" -m ruff check vmi_spark jobs tests || rc=1
    echo "+ mypy (files and options from pyproject.toml)"
    "$PY" -m mypy || rc=1
    return $rc
}

run_tier() {
    # -v: one line per test with its outcome and progress; --durations: the slowest ten
    # shellcheck disable=SC2086
    "$PY" -m pytest -m "$1" -v --durations=10 -p no:cacheprovider ${PYTEST_ARGS:-} \
        2>&1 | tee "$log"
    return "${PIPESTATUS[0]}"
}

# the Spark 3.5 tier's venv: a Databricks 16.4 LTS runtime's PySpark and libraries (its
# system environment; the Connect client's grpcio/protobuf too), nothing else of theirs
SPARK35_DEFAULT_PINS="pyspark==3.5.2 pandas==1.5.3 numpy==1.26.4 pyarrow==15.0.2 \
grpcio==1.60.0 grpcio-status==1.60.0 protobuf==4.24.1 googleapis-common-protos==1.65.0"

SPARK35_VENV=${SPARK35_VENV:-$PWD/.venv35}
SPARK35_PINS=${SPARK35_PINS:-$SPARK35_DEFAULT_PINS}

prepare_spark35() {
    # the Spark 3.5 venv: downloads and builds (PySpark 3.5 is a source distribution), no
    # tests, so it runs in the background while the other steps test (see below)
    local venv=$SPARK35_VENV t0=$SECONDS
    echo "+ $venv: $SPARK35_PINS"
    # the venv stays in the checkout (gitignored): a rerun reuses its downloads
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv" || return 1
    printf '%s\n' $SPARK35_PINS > "$venv/vmi-pins.txt"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$venv/vmi-pins.txt" \
        || return 1
    # test tools under the pins as constraints: they may not change a runtime library
    "$venv/bin/python" -m pip install -q --disable-pip-version-check -c "$venv/vmi-pins.txt" \
        "pytest>=8" || return 1
    echo "   (venv ready after $((SECONDS - t0))s)"
}

run_spark35() {
    local venv=$SPARK35_VENV pins=$SPARK35_PINS
    local work wheel rc t0=$SECONDS
    work=$(mktemp -d)
    if [ -n "${prep_pid:-}" ]; then  # started with the first step
        wait "$prep_pid"; rc=$?
        cat "$prep_log"; rm -f "$prep_log"
        [ "$rc" -eq 0 ] || return 1
        echo "   (waited $((SECONDS - t0))s for it)"
    else
        prepare_spark35 || return 1
    fi
    echo "+ the plain wheel, built from this tree"
    "$PY" -m pip wheel -q --disable-pip-version-check --no-deps --no-build-isolation \
        -w "$work/dist" . || return 1
    wheel=$(ls "$work"/dist/vmi_spark-*.whl)
    echo "+ Spark 4's side under $PY: tests/spark_matrix.py"
    PYSPARK_PYTHON="$PY" PYSPARK_DRIVER_PYTHON="$PY" PYTHONPATH="$PWD" \
        "$PY" tests/spark_matrix.py "$work/spark4" > "$work/spark4.log" 2>&1 \
        || { tail -50 "$work/spark4.log"; return 1; }
    echo "   (Spark 4's side done after $((SECONDS - t0))s)"
    echo "+ PySpark 3.5: tests/test_spark35.py tests/test_compat.py"
    # shellcheck disable=SC2086
    SPARK35_PINS="$pins" VMI_WHEEL="$wheel" VMI_SPARK4_DIR="$work/spark4" \
        VMI_SPARK4_PYTHON="$PY" PYSPARK_PYTHON="$venv/bin/python" \
        PYSPARK_DRIVER_PYTHON="$venv/bin/python" PYTHONPATH="$PWD" \
        "$venv/bin/python" -m pytest -v --durations=10 -p no:cacheprovider ${PYTEST_ARGS:-} \
        tests/test_spark35.py tests/test_compat.py 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    rm -rf "$work"
    return "$rc"
}

# the Spark 3.5 venv is installed while the steps before spark35 run (mostly network and
# disk: the download and build of PySpark 3.5), so the tier only waits for what is left
prep_pid=""
if [[ " ${steps[*]} " == *" spark35 "* ]] && [ "${steps[0]}" != spark35 ]; then
    prep_log=$(mktemp)
    prepare_spark35 > "$prep_log" 2>&1 &
    prep_pid=$!
fi

for step in "${steps[@]}"; do
    case $step in
        lint) title="lint: ruff and mypy" ;;
        unit) title="unit tier: fast, Spark-free (pytest -m unit)" ;;
        spark) title="spark tier: integration on a local SparkSession (pytest -m spark)" ;;
        system) title="system tier: cluster, kill -9, Spark Connect, spark-submit (pytest -m system)" ;;
        spark35) title="spark35 tier: PySpark 3.5 with a Databricks LTS runtime's libraries, install check" ;;
    esac
    header "$title"
    log=$(mktemp)
    start=$(date +%s)
    case $step in
        lint) run_lint ;;
        spark35) run_spark35 ;;
        *) run_tier "$step" ;;
    esac
    rc=$?
    elapsed=$(( $(date +%s) - start ))
    # pytest's closing line ("== 278 passed, 3 skipped in 95.2s =="); exit 5 = nothing collected
    last=$(grep -E '^=+ .*(passed|failed|error|skipped|deselected|no tests ran).* =+$' "$log" \
        | tail -1 | sed -E 's/^=+ //; s/ =+$//')
    [ "$step" = lint ] && last=$([ $rc -eq 0 ] && echo "ruff and mypy clean" || echo "lint FAILED")
    [ "$rc" -eq 5 ] && rc=0
    rm -f "$log"
    printf -- '-- %s: %s in %dm%02ds\n' "$step" "$([ $rc -eq 0 ] && echo ok || echo FAILED)" \
        $((elapsed / 60)) $((elapsed % 60))
    names+=("$step") codes+=("$rc") times+=("$elapsed") lines+=("$last")
done

header "summary"
status=0 total=0
for i in "${!names[@]}"; do
    t=${times[$i]}
    total=$((total + t))
    [ "${codes[$i]}" -ne 0 ] && status=1
    printf '%-7s %-7s %3dm%02ds  %s\n' "${names[$i]}" \
        "$([ "${codes[$i]}" -eq 0 ] && echo ok || echo FAILED)" $((t / 60)) $((t % 60)) "${lines[$i]}"
done
printf '%-7s %-7s %3dm%02ds\n' total "$([ $status -eq 0 ] && echo ok || echo FAILED)" \
    $((total / 60)) $((total % 60))
# one closing line over every tier, in the plain form CI reads ("N passed, N failed")
count() { grep -oE "[0-9]+ $1" <<<"${lines[*]}" | awk '{s += $1} END {print s + 0}'; }
failed=$(( $(count failed) + $(count error) ))
[ $status -ne 0 ] && [ "$failed" -eq 0 ] && failed=1  # a failed lint step or a crashed tier
echo
echo "all tiers: $(count passed) passed, $failed failed, $(count skipped) skipped"
exit $status
