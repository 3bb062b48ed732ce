"""ThreadSafeStore, indexers, keys and the Lister."""

from __future__ import annotations

from typing import Any

import pytest

from informers.lister import Lister, labels_match
from informers.store import (
    CONTROLLER_UID_INDEX,
    NAMESPACE_INDEX,
    DeletedFinalStateUnknown,
    ThreadSafeStore,
    controller_ref,
    controller_uid_index,
    meta_namespace_key,
    namespace_index,
    split_key,
)
from kubeclient import Obj


def pod(
    name: str,
    namespace: str | None = "ns",
    *,
    labels: dict[str, str] | None = None,
    owners: list[dict[str, Any]] | None = None,
    rv: str = "1",
) -> Obj:
    meta: Obj = {"name": name, "resourceVersion": rv}
    if namespace:
        meta["namespace"] = namespace
    if labels is not None:
        meta["labels"] = labels
    if owners is not None:
        meta["ownerReferences"] = owners
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta}


def owner(uid: str, *, controller: bool = True, name: str = "job") -> dict[str, Any]:
    return {
        "apiVersion": "qihoo.net/v1alpha1",
        "kind": "DGLJob",
        "name": name,
        "uid": uid,
        "controller": controller,
    }


def indexed_store() -> ThreadSafeStore:
    return ThreadSafeStore(
        {NAMESPACE_INDEX: namespace_index, CONTROLLER_UID_INDEX: controller_uid_index}
    )


def put(store: ThreadSafeStore, *objs: Obj) -> None:
    for o in objs:
        store.put(meta_namespace_key(o), o)


# -- keys ------------------------------------------------------------------------------------


def test_meta_namespace_key_namespaced_and_cluster_scoped() -> None:
    assert meta_namespace_key(pod("a", "ns1")) == "ns1/a"
    assert meta_namespace_key(pod("node-1", None)) == "node-1"
    assert meta_namespace_key({"metadata": {"name": "x", "namespace": ""}}) == "x"


def test_meta_namespace_key_of_tombstone_is_its_key() -> None:
    tomb = DeletedFinalStateUnknown("ns1/a", pod("a", "ns1"))
    assert meta_namespace_key(tomb) == "ns1/a"  # type: ignore[arg-type]


def test_split_key_roundtrip() -> None:
    assert split_key("ns1/a") == ("ns1", "a")
    assert split_key("node-1") == ("", "node-1")
    for o in (pod("a", "ns1"), pod("cluster-thing", None)):
        ns, name = split_key(meta_namespace_key(o))
        assert name == o["metadata"]["name"]
        assert ns == o["metadata"].get("namespace", "")


@pytest.mark.parametrize("key", ["a/b/c", "/a", "a/", "/"])
def test_split_key_malformed_raises(key: str) -> None:
    with pytest.raises(ValueError, match="unexpected key format"):
        split_key(key)


# -- basic operations -----------------------------------------------------------------------


def test_put_get_delete_list() -> None:
    s = ThreadSafeStore()
    a1, a2, b = pod("a", rv="1"), pod("a", rv="2"), pod("b")
    assert s.put("ns/a", a1) is None
    assert s.put("ns/b", b) is None
    assert s.get("ns/a") is a1
    assert s.put("ns/a", a2) is a1  # returns the previous object
    assert s.get("ns/a") is a2
    assert len(s) == 2
    assert sorted(s.list_keys()) == ["ns/a", "ns/b"]
    assert sorted(o["metadata"]["resourceVersion"] for o in s.list()) == ["1", "2"]
    assert s.delete("ns/a") is a2
    assert s.get("ns/a") is None
    assert s.delete("ns/a") is None  # deleting a missing key is a no-op
    assert s.list() == [b]
    assert len(s) == 1


def test_replace_swaps_contents_and_rebuilds_indices() -> None:
    s = indexed_store()
    put(s, pod("a", "ns1"), pod("b", "ns2"))
    c, d = pod("c", "ns2"), pod("d", "ns3", owners=[owner("u1")])
    s.replace({"ns2/c": c, "ns3/d": d})
    assert sorted(s.list_keys()) == ["ns2/c", "ns3/d"]
    assert s.get("ns1/a") is None
    assert s.index_keys(NAMESPACE_INDEX, "ns1") == []
    assert s.index_keys(NAMESPACE_INDEX, "ns2") == ["ns2/c"]
    assert s.by_index(NAMESPACE_INDEX, "ns3") == [d]
    assert s.by_index(CONTROLLER_UID_INDEX, "u1") == [d]
    s.replace({})
    assert len(s) == 0
    assert s.index_keys(NAMESPACE_INDEX, "ns2") == []


def test_replace_copies_the_mapping() -> None:
    s = ThreadSafeStore()
    items = {"ns/a": pod("a")}
    s.replace(items)
    items["ns/b"] = pod("b")
    assert s.list_keys() == ["ns/a"]


def test_items_of_skips_missing_keys() -> None:
    s = ThreadSafeStore()
    a, b = pod("a"), pod("b")
    put(s, a, b)
    assert s.items_of(["ns/b", "ns/zzz", "ns/a"]) == [b, a]


# -- indexers -------------------------------------------------------------------------------


def test_namespace_index() -> None:
    s = indexed_store()
    a, b, c = pod("a", "ns1"), pod("b", "ns1"), pod("c", "ns2")
    put(s, a, b, c, pod("node", None))
    assert s.index_keys(NAMESPACE_INDEX, "ns1") == ["ns1/a", "ns1/b"]
    assert s.by_index(NAMESPACE_INDEX, "ns2") == [c]
    assert s.by_index(NAMESPACE_INDEX, "missing") == []
    # cluster-scoped objects are in no namespace bucket
    assert all("node" not in s.index_keys(NAMESPACE_INDEX, ns) for ns in ("", "ns1", "ns2"))


def test_unknown_index_raises_key_error() -> None:
    s = ThreadSafeStore()
    with pytest.raises(KeyError, match="no indexer named"):
        s.index_keys("nope", "x")
    with pytest.raises(KeyError):
        s.by_index("nope", "x")


def test_controller_ref_picks_the_controller_owner() -> None:
    o = pod("a", owners=[owner("u-not", controller=False), owner("u-ctl")])
    ref = controller_ref(o)
    assert ref is not None and ref["uid"] == "u-ctl"
    ref["uid"] = "changed"  # a copy: the object is not modified
    assert o["metadata"]["ownerReferences"][1]["uid"] == "u-ctl"
    assert controller_ref(pod("b", owners=[owner("u", controller=False)])) is None
    assert controller_ref(pod("c")) is None
    assert controller_uid_index(pod("d", owners=[owner("u-ctl")])) == ["u-ctl"]
    assert controller_uid_index(pod("e", owners=[owner("u", controller=False)])) == []


def test_controller_uid_index_only_counts_controllers() -> None:
    s = indexed_store()
    p1 = pod("p1", owners=[owner("job-1")])
    p2 = pod("p2", owners=[owner("job-1")])
    p3 = pod("p3", owners=[owner("job-1", controller=False)])  # owned, not controlled
    p4 = pod("p4", owners=[owner("job-2")])
    put(s, p1, p2, p3, p4, pod("orphan"))
    assert s.index_keys(CONTROLLER_UID_INDEX, "job-1") == ["ns/p1", "ns/p2"]
    assert s.by_index(CONTROLLER_UID_INDEX, "job-2") == [p4]


def test_index_follows_owner_change_and_delete() -> None:
    s = indexed_store()
    put(s, pod("p", owners=[owner("job-1")], rv="1"))
    assert s.index_keys(CONTROLLER_UID_INDEX, "job-1") == ["ns/p"]

    # the controller changes: the old index value loses the key, the new one gains it
    put(s, pod("p", owners=[owner("job-2")], rv="2"))
    assert s.index_keys(CONTROLLER_UID_INDEX, "job-1") == []
    assert s.index_keys(CONTROLLER_UID_INDEX, "job-2") == ["ns/p"]

    # released (no controller any more): not indexed at all
    put(s, pod("p", owners=[owner("job-2", controller=False)], rv="3"))
    assert s.index_keys(CONTROLLER_UID_INDEX, "job-2") == []

    put(s, pod("p", owners=[owner("job-3")], rv="4"))
    put(s, pod("q", owners=[owner("job-3")], rv="5"))
    assert s.index_keys(CONTROLLER_UID_INDEX, "job-3") == ["ns/p", "ns/q"]
    s.delete("ns/p")
    assert s.index_keys(CONTROLLER_UID_INDEX, "job-3") == ["ns/q"]
    s.delete("ns/q")
    assert s.index_keys(CONTROLLER_UID_INDEX, "job-3") == []
    assert s.index_keys(NAMESPACE_INDEX, "ns") == []


def test_namespace_index_follows_relocation() -> None:
    # Not something the API allows, but the index must never keep a stale value.
    s = indexed_store()
    s.put("k", pod("a", "ns1"))
    s.put("k", pod("a", "ns2"))
    assert s.index_keys(NAMESPACE_INDEX, "ns1") == []
    assert s.index_keys(NAMESPACE_INDEX, "ns2") == ["k"]


def test_add_indexers_after_items_exist() -> None:
    s = ThreadSafeStore({NAMESPACE_INDEX: namespace_index})
    p1 = pod("p1", owners=[owner("job-1")])
    put(s, p1, pod("p2"))
    s.add_indexers({CONTROLLER_UID_INDEX: controller_uid_index})
    assert s.by_index(CONTROLLER_UID_INDEX, "job-1") == [p1]
    # and keeps it up to date afterwards
    p3 = pod("p3", owners=[owner("job-1")])
    put(s, p3)
    assert s.index_keys(CONTROLLER_UID_INDEX, "job-1") == ["ns/p1", "ns/p3"]
    s.delete("ns/p1")
    assert s.by_index(CONTROLLER_UID_INDEX, "job-1") == [p3]


def test_add_indexers_same_function_is_idempotent_other_function_rejected() -> None:
    s = ThreadSafeStore({NAMESPACE_INDEX: namespace_index})
    put(s, pod("a"))
    s.add_indexers({NAMESPACE_INDEX: namespace_index})
    assert s.index_keys(NAMESPACE_INDEX, "ns") == ["ns/a"]
    with pytest.raises(ValueError, match="already registered"):
        s.add_indexers({NAMESPACE_INDEX: lambda o: ["x"]})


def test_multi_valued_index() -> None:
    def by_label_values(o: Obj) -> list[str]:
        return sorted(((o.get("metadata") or {}).get("labels") or {}).values())

    s = ThreadSafeStore({"labels": by_label_values})
    s.put("ns/a", pod("a", labels={"x": "1", "y": "2"}))
    s.put("ns/b", pod("b", labels={"x": "2"}))
    assert s.index_keys("labels", "2") == ["ns/a", "ns/b"]
    s.put("ns/a", pod("a", labels={"x": "1"}))
    assert s.index_keys("labels", "2") == ["ns/b"]
    assert s.index_keys("labels", "1") == ["ns/a"]


# -- lister -----------------------------------------------------------------------------------


@pytest.fixture
def lister() -> Lister:
    s = indexed_store()
    put(
        s,
        pod("w0", "team", labels={"app": "dgl", "role": "worker"}, owners=[owner("job-1")]),
        pod("w1", "team", labels={"app": "dgl", "role": "worker"}, owners=[owner("job-1")]),
        pod("launcher", "team", labels={"app": "dgl", "role": "launcher"}, owners=[owner("j2")]),
        pod("w0", "other", labels={"app": "dgl", "role": "worker"}),
        pod("unlabelled", "other"),
        pod("node-x", None),
    )
    return Lister(s)


def names(objs: list[Obj]) -> list[str]:
    return sorted(meta_namespace_key(o) for o in objs)


def test_lister_get(lister: Lister) -> None:
    got = lister.get("team", "w0")
    assert got is not None and got["metadata"]["namespace"] == "team"
    other = lister.get("other", "w0")
    assert other is not None and other["metadata"]["namespace"] == "other"
    assert lister.get("team", "nope") is None
    cluster = lister.get("", "node-x")
    assert cluster is not None and cluster["metadata"]["name"] == "node-x"


def test_lister_list_by_namespace_and_selector(lister: Lister) -> None:
    assert len(lister.list()) == 6
    assert names(lister.list("team")) == ["team/launcher", "team/w0", "team/w1"]
    assert names(lister.list("other")) == ["other/unlabelled", "other/w0"]
    assert lister.list("empty-ns") == []
    assert names(lister.list("team", {"role": "worker"})) == ["team/w0", "team/w1"]
    assert names(lister.list(None, {"role": "worker"})) == ["other/w0", "team/w0", "team/w1"]
    assert names(lister.list(selector={"app": "dgl", "role": "launcher"})) == ["team/launcher"]
    assert lister.list("team", {"role": "ps"}) == []
    # an empty selector matches everything
    assert len(lister.list("other", {})) == 2


def test_labels_match() -> None:
    o = pod("a", labels={"a": "1", "b": "2"})
    assert labels_match({}, o)
    assert labels_match({"a": "1"}, o)
    assert not labels_match({"a": "2"}, o)
    assert not labels_match({"c": "1"}, o)
    assert not labels_match({"a": "1"}, pod("unlabelled"))


def test_lister_controlled_by(lister: Lister) -> None:
    assert names(lister.controlled_by("job-1")) == ["team/w0", "team/w1"]
    assert names(lister.controlled_by("j2")) == ["team/launcher"]
    assert lister.controlled_by("unknown") == []


def test_lister_controlled_by_needs_the_indexer() -> None:
    s = ThreadSafeStore({NAMESPACE_INDEX: namespace_index})
    with pytest.raises(KeyError):
        Lister(s).controlled_by("job-1")
