"""Test support: an independent reference graph (networkx) of emitted OpenLineage events: datasets and jobs joined by their inputs and outputs."""

from __future__ import annotations

import networkx as nx


def dataset_node(dataset: dict) -> str:
    return f"dataset:{dataset['namespace']}:{dataset['name']}"


def job_node(job: dict) -> str:
    return f"job:{job['namespace']}:{job['name']}"


def build_graph(events: list[dict]) -> nx.DiGraph:
    """Directed graph input dataset -> job -> output dataset, from every run event that names datasets."""
    graph = nx.DiGraph()
    for event in events:
        if "job" not in event or "run" not in event:
            continue
        job = job_node(event["job"])
        graph.add_node(job, kind="job", name=event["job"]["name"], namespace=event["job"]["namespace"])
        for dataset in event.get("inputs") or []:
            node = dataset_node(dataset)
            graph.add_node(node, kind="dataset", name=dataset["name"], namespace=dataset["namespace"])
            graph.add_edge(node, job)
        for dataset in event.get("outputs") or []:
            node = dataset_node(dataset)
            graph.add_node(node, kind="dataset", name=dataset["name"], namespace=dataset["namespace"])
            graph.add_edge(job, node)
    return graph


def dataset_lineage(events: list[dict]) -> nx.DiGraph:
    """Datasets only: an edge where one run read the first and wrote the second (per run, so two runs of one job
    with different inputs, e.g. two models, do not cross)."""
    datasets = nx.DiGraph()
    for event in events:
        for source in event.get("inputs") or []:
            for target in event.get("outputs") or []:
                datasets.add_edge(dataset_node(source), dataset_node(target), job=event["job"]["name"])
    return datasets
