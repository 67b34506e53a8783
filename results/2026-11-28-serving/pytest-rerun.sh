set -u
D=$(mktemp -d); tar xJf .device-ab/final2.tar.xz -C "$D"
python3 -m pip install --quiet --no-index --no-deps --force-reinstall "$D"/kernel_ops-*.whl > /dev/null 2>&1
cd /tmp && timeout 200 python3 -m pytest -q -rs "$OLDPWD/python/tests" > $OUT/pytest.log 2>&1; echo "exit $?"; tail -n 15 $OUT/pytest.log
