#!/usr/bin/env bash
# Installs everything the project needs on a fresh Debian machine, idempotently:
# the Python package with its test and Spark extras, the Debian tools the docker backend uses, the
# headless browser of the page tests (Debian's chromium and its driver; Selenium is in `dev`), and
# kcat, the Kafka command-line client that the node's tests drive, and fuse3 for the disk faults.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v debootstrap >/dev/null 2>&1 || need_apt+=(debootstrap)
command -v java >/dev/null 2>&1 || need_apt+=(openjdk-17-jre-headless)
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
command -v chromedriver >/dev/null 2>&1 || need_apt+=(chromium-driver)
command -v kcat >/dev/null 2>&1 || need_apt+=(kcat)
# the disk nemeses' FUSE filesystem on the local backend (libfuse3 and fusermount3)
command -v fusermount3 >/dev/null 2>&1 || need_apt+=(fuse3)
# the other targets (issue 14) on the local backend: etcd 3.4 with etcdctl, NATS server 2.9
command -v etcd >/dev/null 2>&1 || need_apt+=(etcd-server)
command -v etcdctl >/dev/null 2>&1 || need_apt+=(etcd-client)
command -v nats-server >/dev/null 2>&1 || need_apt+=(nats-server)
if [ ${#need_apt[@]} -gt 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "== apt-get install ${need_apt[*]}"
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

echo "== pip install -e .[dev,spark]"
# wheel: the docker images install the project from a wheel built here, offline.
python3 -m pip install -q --disable-pip-version-check wheel 'setuptools>=70.1' 2>&1 \
  | grep -v -e 'Running pip as the .root. user' -e '^$' || true
python3 -m pip install -q --disable-pip-version-check -e '.[dev,spark]' 2>&1 \
  | grep -v -e 'Running pip as the .root. user' -e '^$' || true
