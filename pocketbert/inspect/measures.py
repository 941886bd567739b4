"""Numbers about embeddings, clusters, attention and errors: plain functions of arrays, each checkable by hand."""

from __future__ import annotations

import numpy as np

PROBE_TEST_FRACTION = 0.3  # share of the examples the linear probe is scored on, never trained on
PROBE_MAX_ITER = 2000


def purity(clusters: np.ndarray, labels: np.ndarray) -> float:
    """Share of examples whose cluster's most common gold label is their own (1.0: every cluster is pure)."""
    clusters, labels = np.asarray(clusters), np.asarray(labels)
    majority = sum(np.bincount(labels[clusters == c]).max() for c in np.unique(clusters))
    return float(majority / len(labels))


def adjusted_rand(clusters: np.ndarray, labels: np.ndarray) -> float:
    """Agreement of two partitions corrected for chance: 1 identical, about 0 for a random clustering."""
    from sklearn.metrics import adjusted_rand_score

    return float(adjusted_rand_score(labels, clusters))


def silhouette(embeddings: np.ndarray, clusters: np.ndarray, seed: int) -> float | None:
    """Mean silhouette of the clusters in the embedding space (cosine distance); None with a single cluster."""
    from sklearn.metrics import silhouette_score

    if len(np.unique(clusters)) < 2:
        return None
    return float(silhouette_score(embeddings, clusters, metric="cosine", random_state=seed))


def probe_split(labels: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Train and test indices, stratified by label, disjoint, covering every example."""
    rng = np.random.default_rng(seed)
    train, test = [], []
    for label in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == label))
        n_test = max(1, int(round(PROBE_TEST_FRACTION * len(members)))) if len(members) > 1 else 0
        test.extend(members[:n_test])
        train.extend(members[n_test:])
    return np.sort(np.array(train, dtype=int)), np.sort(np.array(test, dtype=int))


def linear_probe(embeddings: np.ndarray, labels: np.ndarray, seed: int) -> dict:
    """Accuracy of a logistic regression trained on the probe's train split, scored on its held-out split."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    train, test = probe_split(labels, seed)
    if len(np.unique(labels[train])) < 2 or len(test) == 0:
        return {"accuracy": None, "train": int(len(train)), "test": int(len(test)),
                "note": "too few examples of some label for a probe"}
    scaler = StandardScaler().fit(embeddings[train])
    probe = LogisticRegression(max_iter=PROBE_MAX_ITER, random_state=seed)
    probe.fit(scaler.transform(embeddings[train]), labels[train])
    accuracy = float((probe.predict(scaler.transform(embeddings[test])) == labels[test]).mean())
    return {"accuracy": accuracy, "train": int(len(train)), "test": int(len(test))}


def cluster_and_project(embeddings: np.ndarray, k: int, perplexity: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(Gaussian-mixture cluster of each example, 2-d t-SNE coordinates). The mixture is fitted in a
    50-dimensional PCA of the embeddings: full covariances in 384 dimensions would need more points than a
    quick look has."""
    from sklearn.decomposition import PCA
    from sklearn.manifold import TSNE
    from sklearn.mixture import GaussianMixture

    n = len(embeddings)
    reduced = PCA(n_components=min(50, n - 1, embeddings.shape[1]), random_state=seed).fit_transform(embeddings)
    clusters = GaussianMixture(n_components=min(k, n), covariance_type="diag", random_state=seed).fit_predict(reduced)
    coords = TSNE(n_components=2, perplexity=min(perplexity, (n - 1) / 3), init="pca", random_state=seed)\
        .fit_transform(embeddings)
    return clusters, coords


def attention_entropy(attention: np.ndarray, mask: np.ndarray) -> float:
    """Mean entropy (nats) of the attention rows of real query tokens, per head, averaged.

    attention: [heads, T, T] of one layer and one example; mask: [T] 1 for real tokens.
    """
    real = mask.astype(bool)
    rows = attention[:, real][:, :, real]  # [heads, n, n]: padding neither asks nor is attended
    rows = rows / rows.sum(axis=-1, keepdims=True)
    return float(-(rows * np.log(np.clip(rows, 1e-12, None))).sum(axis=-1).mean())


def linear_cka(x: np.ndarray, y: np.ndarray) -> float:
    """Linear centred kernel alignment of two models' embeddings of the same examples, [n, d1] and [n, d2]
    (Kornblith et al. 2019): 1 when one is a rotation and scaling of the other, whatever the two widths, near 0
    when unrelated. It compares what the examples look like to each model, so a narrow student's embeddings
    compare with its teacher's without any mapping between their channels."""
    x = np.asarray(x, dtype=np.float64) - np.mean(x, axis=0)
    y = np.asarray(y, dtype=np.float64) - np.mean(y, axis=0)
    cross = np.linalg.norm(y.T @ x) ** 2
    norms = np.linalg.norm(x.T @ x) * np.linalg.norm(y.T @ y)
    return float(cross / norms) if norms > 0 else 0.0


def attention_distance(a: np.ndarray, b: np.ndarray, mask: np.ndarray) -> float:
    """Mean total-variation distance between the rows of two [T, T] attention maps of one example (0: the same
    distribution over keys, 1: disjoint), over real query tokens, each row renormalised over the real keys."""
    real = mask.astype(bool)
    rows_a, rows_b = a[real][:, real], b[real][:, real]
    rows_a = rows_a / rows_a.sum(axis=-1, keepdims=True)
    rows_b = rows_b / rows_b.sum(axis=-1, keepdims=True)
    return float(0.5 * np.abs(rows_a - rows_b).sum(axis=-1).mean())


def confusion(gold: np.ndarray, predicted: np.ndarray, n_classes: int) -> np.ndarray:
    """counts[g, p]: examples of gold class g predicted as p."""
    matrix = np.zeros((n_classes, n_classes), dtype=int)
    np.add.at(matrix, (gold, predicted), 1)
    return matrix


def hardest_classes(matrix: np.ndarray, label_names: list[str], n: int = 3) -> list[dict]:
    """The classes with the lowest recall, and what they are most often mistaken for."""
    rows = []
    for k, name in enumerate(label_names):
        total = int(matrix[k].sum())
        if not total:
            continue
        others = matrix[k].copy()
        others[k] = 0
        rows.append({"label": name, "recall": float(matrix[k, k] / total), "n": total,
                     "most_confused_with": label_names[int(others.argmax())] if others.any() else None})
    return sorted(rows, key=lambda r: r["recall"])[:n]
