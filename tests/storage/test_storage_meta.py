"""meta.properties and formatting, as `kafka-storage format` does them."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from reference_node.storage import (
    METADATA_PARTITION_DIR,
    MetaProperties,
    StorageError,
    format_storage,
    random_uuid,
)

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qk"


def test_format_writes_kafkas_meta_properties(tmp_path: Path) -> None:
    meta = format_storage(tmp_path / "d", CLUSTER, 3)
    text = (tmp_path / "d" / "meta.properties").read_text()
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    assert sorted(lines) == sorted(
        [f"cluster.id={CLUSTER}", f"directory.id={meta.directory_id}", "node.id=3", "version=1"]
    )
    assert (tmp_path / "d" / METADATA_PARTITION_DIR).is_dir()
    assert MetaProperties.load(tmp_path / "d") == meta


def test_random_uuid_is_kafkas_base64_form() -> None:
    for _ in range(200):
        text = random_uuid()
        assert len(text) == 22 and not text.startswith("-")
        assert len(base64.urlsafe_b64decode(text + "==")) == 16


def test_formatting_again_is_a_no_op_only_for_the_same_node(tmp_path: Path) -> None:
    first = format_storage(tmp_path, CLUSTER, 1)
    assert format_storage(tmp_path, CLUSTER, 1) == first
    with pytest.raises(StorageError, match=r"node\.id=1.*node\.id=2.*already formatted"):
        format_storage(tmp_path, CLUSTER, 2)
    with pytest.raises(StorageError, match="foreign cluster"):
        format_storage(tmp_path, random_uuid(), 1)


def test_load_refuses_another_node_or_cluster(tmp_path: Path) -> None:
    format_storage(tmp_path, CLUSTER, 1)
    with pytest.raises(StorageError) as err:
        MetaProperties.load(tmp_path, node_id=2)
    assert "node.id=1" in str(err.value) and "node.id=2" in str(err.value)
    assert "meta.properties" in str(err.value)
    with pytest.raises(StorageError, match=f"{CLUSTER}.*other"):
        MetaProperties.load(tmp_path, cluster_id="other")
    assert MetaProperties.load(tmp_path, node_id=1, cluster_id=CLUSTER).node_id == 1


def test_unformatted_and_malformed_files_are_explained(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="not formatted"):
        MetaProperties.load(tmp_path)
    (tmp_path / "meta.properties").write_text("version=0\nbroker.id=1\n")
    with pytest.raises(StorageError, match="only version 1"):
        MetaProperties.load(tmp_path)
    (tmp_path / "meta.properties").write_text("version=1\ncluster.id=x\n")
    with pytest.raises(StorageError, match=r"missing node\.id"):
        MetaProperties.load(tmp_path)
    (tmp_path / "meta.properties").write_text("version=1\ncluster.id=x\nnode.id=one\n")
    with pytest.raises(StorageError, match="not an integer"):
        MetaProperties.load(tmp_path)
    (tmp_path / "meta.properties").write_text(
        "version=1\ncluster.id=x\nnode.id=1\ndirectory.id=abc\n"
    )
    with pytest.raises(StorageError, match="not a Kafka Uuid"):
        MetaProperties.load(tmp_path)


def test_format_refuses_bad_ids(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="cluster id"):
        format_storage(tmp_path, "has space", 1)
    with pytest.raises(StorageError, match="node id"):
        format_storage(tmp_path, CLUSTER, -1)
    assert not (tmp_path / "meta.properties").exists()
