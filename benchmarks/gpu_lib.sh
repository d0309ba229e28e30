# Shared by the GPU scripts (pqn_gpu.sh, trxl_gpu.sh, jaxmarl_gpu.sh); sourced from the repo root.

# install_wheels PYTHON SITE: the carried .whl/*.whl into SITE, from no index, without their
# dependencies (the wheels are the whole set; the image keeps its own jax)
install_wheels() {
  "$1" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$2" .whl/*.whl
}

# link_scanrl PKG: scanrl.algos and scanrl.common from this tree under PKG, as an install names
# them (PKG goes on PYTHONPATH)
link_scanrl() {
  mkdir -p "$1/scanrl"
  ln -sfn "$PWD/algos" "$1/scanrl/algos"
  ln -sfn "$PWD/common" "$1/scanrl/common"
}
