"""`pocketbert inspect`: teacher and student side by side on eval examples of several datasets.

For each dataset: sentence embeddings projected with t-SNE and clustered with a Gaussian mixture, the
clusters scored against the gold labels (purity, adjusted Rand index, silhouette), a linear probe on the
embeddings, the confusion matrix, and attention (averaged over heads) on chosen examples with its entropy
per layer. Everything the report shows is written to inspect.json first.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch

from pocketbert.core.students.architectures import architecture_of
from pocketbert.core.tasks.data import subsample
from pocketbert.core.tasks.task_data import load_task_data
from pocketbert.core.students.stage_folder import load_stage_model
from pocketbert.core.config.recipe import complete_recipe, cross_domain_datasets
from pocketbert.core.errors import ConfigError, ModelError, require
from pocketbert.inspect import measures
from pocketbert.core.run.manifest import command_line, read_verified_stage, verified_stage
from pocketbert.core.run.atomic_folder import require_stage
from pocketbert.core.run.run_files import MANIFEST, STUDENT_DIR, TEACHER_DIR
from pocketbert.core.run.user_paths import recorded_dataset, recorded_path

DEFAULT_EXAMPLES = 500  # per dataset: t-SNE of 500 points takes seconds; the whole inspect stays within minutes
DEFAULT_CLUSTERS = 9
DEFAULT_PERPLEXITY = 30.0
POOLINGS = ("cls", "mean")
ATTENTION_EXAMPLES = 3  # of each kind: the student wrong where the teacher is right, and both right
ATTENTION_MAX_TOKENS = 24  # longer sentences make heat maps nobody can read
ENTROPY_EXAMPLES = 200
BATCH_SIZE = 64
ROLES = ("teacher", "student")
WRONG, RIGHT = "student wrong, teacher right", "both right"


def encode_all(architecture, model, task, features: list, pad_id: int, pooling: str):
    """Embeddings [N, dim] and logits [N, classes] of every feature, batched by length."""
    order = sorted(range(len(features)), key=lambda i: len(features[i].input_ids))
    embeddings, logits = [None] * len(features), [None] * len(features)
    with torch.no_grad():
        for start in range(0, len(order), BATCH_SIZE):
            idx = order[start:start + BATCH_SIZE]
            batch = task.collate([features[i] for i in idx], pad_id)
            inputs = {k: torch.from_numpy(batch[k]) for k in task.input_names}
            emb, out, _ = architecture.encode(model, inputs, pooling, with_attention=False)
            for row, i in enumerate(idx):
                embeddings[i], logits[i] = emb[row].float().numpy(), out[row].float().numpy()
    return np.stack(embeddings), np.stack(logits)


def attention_maps(architecture, model, task, feature, pad_id: int) -> list[np.ndarray]:
    """Per layer, the [heads, T, T] attention of one unpadded example."""
    batch = task.collate([feature], pad_id)
    with torch.no_grad():
        _, _, attentions = architecture.encode(model, {k: torch.from_numpy(batch[k]) for k in task.input_names},
                                               "cls", with_attention=True)
    return [a[0].float().numpy() for a in attentions]


def entropy_per_layer(architecture, model, task, features: list, pad_id: int) -> list[float]:
    """Mean attention entropy of every layer over `features`, over real tokens only (padded keys carry no
    weight, and the rows are renormalised over the real ones)."""
    totals = None
    with torch.no_grad():
        for start in range(0, len(features), BATCH_SIZE):
            chunk = features[start:start + BATCH_SIZE]
            batch = task.collate(chunk, pad_id)
            _, _, attentions = architecture.encode(model, {k: torch.from_numpy(batch[k]) for k in task.input_names},
                                                   "cls", with_attention=True)
            for row in range(len(chunk)):
                values = np.array([measures.attention_entropy(layer[row].float().numpy(), batch["attention_mask"][row])
                                   for layer in attentions])
                totals = values if totals is None else totals + values
    return [round(float(v), 4) for v in totals / len(features)]


def mapped_attention(models: dict, task, features: list, pad_id: int, layer_map: list[int]) -> list[dict]:
    """For every student layer, how far its head-averaged attention is from that of the teacher layer it was cut
    from (the student's layer_map), on the same examples: a per-token comparison that needs no correspondence
    between the two models' widths or heads."""
    totals = np.zeros(len(layer_map))
    with torch.no_grad():
        for start in range(0, len(features), BATCH_SIZE):
            chunk = features[start:start + BATCH_SIZE]
            batch = task.collate(chunk, pad_id)
            inputs = {k: torch.from_numpy(batch[k]) for k in task.input_names}
            maps = {}
            for role in ROLES:
                model, architecture = models[role]
                maps[role] = [a.float().mean(dim=1).numpy()  # over heads
                              for a in architecture.encode(model, inputs, "cls", with_attention=True)[2]]
            for i, j in enumerate(layer_map):
                totals[i] += sum(measures.attention_distance(maps["student"][i][row], maps["teacher"][j][row],
                                                             batch["attention_mask"][row]) for row in range(len(chunk)))
    return [{"student_layer": i + 1, "teacher_layer": j + 1, "distance": round(float(totals[i] / len(features)), 4)}
            for i, j in enumerate(layer_map)]


def pick_attention_examples(gold: np.ndarray, predictions: dict, features: list, seed: int) -> list[tuple[int, str]]:
    """Short examples the student gets wrong and the teacher right, then ones both get right."""
    rng = np.random.default_rng(seed)
    short = np.array([len(f.input_ids) <= ATTENTION_MAX_TOKENS for f in features])
    teacher_right, student_right = predictions["teacher"] == gold, predictions["student"] == gold
    picked = []
    for kind, chosen in ((WRONG, teacher_right & ~student_right), (RIGHT, teacher_right & student_right)):
        pool = np.flatnonzero(chosen & short)
        picked += [(int(i), kind) for i in rng.permutation(pool)[:ATTENTION_EXAMPLES]]
    return picked


def inspect_dataset(name: str, models: dict, task, tokenizer, data_dir, n_examples: int, pooling: str, k: int,
                    perplexity: float, seed: int, max_length: int, progress, layer_map: list[int] | None = None) -> dict:
    data = load_task_data(name, task.name, data_dir, None, task.label_names, seed)
    task.check_label_names(data.label_names, f"dataset '{name}'")
    examples = subsample(data.eval, n_examples, seed)
    features = task.features(tokenizer, examples, max_length)
    gold = np.array([f.label for f in features])
    result: dict = {"n_examples": len(features), "gold": gold.tolist(), "models": {}}
    predictions, embedded = {}, {}
    for role in ROLES:
        model, architecture = models[role]
        progress.set_description(f"{name}: {role} embeddings")
        embeddings, logits = encode_all(architecture, model, task, features, tokenizer.pad_token_id, pooling)
        embedded[role] = embeddings
        predictions[role] = logits.argmax(axis=1)
        progress.set_description(f"{name}: {role} t-SNE and clusters")
        clusters, coords = measures.cluster_and_project(embeddings, k, perplexity, seed)
        matrix = measures.confusion(gold, predictions[role], len(task.label_names))
        entropy = None
        if architecture.attends:
            progress.set_description(f"{name}: {role} attention entropy")
            entropy = entropy_per_layer(architecture, model, task, features[:ENTROPY_EXAMPLES],
                                        tokenizer.pad_token_id)
        result["models"][role] = {
            "accuracy": float((predictions[role] == gold).mean()),
            "predictions": predictions[role].tolist(),
            "clusters": clusters.tolist(),
            "tsne": np.round(coords, 3).tolist(),
            "purity": measures.purity(clusters, gold),
            "adjusted_rand": measures.adjusted_rand(clusters, gold),
            "silhouette": measures.silhouette(embeddings, clusters, seed),
            "probe": measures.linear_probe(embeddings, gold, seed),
            "attention_entropy": entropy,
            "attention_entropy_examples": min(len(features), ENTROPY_EXAMPLES) if entropy else 0,
            "confusion": matrix.tolist(),
            "hardest_classes": measures.hardest_classes(matrix, task.label_names),
        }
        progress.update()
    # per-model quantities compared: the two widths need not match
    result["embedding_cka"] = measures.linear_cka(embedded["teacher"], embedded["student"])
    result["mapped_attention"] = None
    if layer_map and all(models[role][1].attends for role in ROLES):
        progress.set_description(f"{name}: attention beside the teacher's")
        result["mapped_attention"] = mapped_attention(models, task, features[:ENTROPY_EXAMPLES],
                                                      tokenizer.pad_token_id, layer_map)
    chosen = []
    for i, kind in pick_attention_examples(gold, predictions, features, seed):
        entry = {"kind": kind, "text": examples[i].text, "gold": task.label_names[gold[i]],
                 "tokens": tokenizer.convert_ids_to_tokens(features[i].input_ids),
                 "predicted": {role: task.label_names[predictions[role][i]] for role in ROLES}, "attention": {}}
        for role in ROLES:
            model, architecture = models[role]
            if architecture.attends:
                maps = attention_maps(architecture, model, task, features[i], tokenizer.pad_token_id)
                entry["attention"][role] = [np.round(m.mean(axis=0), 4).tolist() for m in maps]  # over heads
        chosen.append(entry)
    result["attention_examples"] = chosen
    return result


def cut_from(info: dict, student, teacher) -> list[int] | None:
    """The teacher layer each student layer was cut from (the student folder's layer_map), or None for a student
    that was not cut from this teacher (a BiLSTM, a checkpoint, a map that does not fit the two models)."""
    from pocketbert.core.students.models import layer_count

    layer_map = info.get("layer_map")
    if not isinstance(layer_map, list):
        return None
    try:
        n_student, n_teacher = layer_count(student.config), layer_count(teacher.config)
    except (AttributeError, ModelError):
        return None
    if len(layer_map) != n_student:
        return None
    if not all(isinstance(j, int) and 0 <= j < n_teacher for j in layer_map):
        return None
    return layer_map


def inspect_run(run_dir: Path, datasets: list[str] | None = None, n_examples: int = DEFAULT_EXAMPLES,
                data_dir: Path | None = None, pooling: str = "cls", k: int = DEFAULT_CLUSTERS,
                perplexity: float = DEFAULT_PERPLEXITY) -> dict:
    from tqdm.auto import tqdm

    require("sklearn", "inspect")  # t-SNE, the mixture, the probe
    if pooling not in POOLINGS:
        raise ConfigError(f"--pooling must be one of {', '.join(POOLINGS)} (got '{pooling}')")
    if n_examples < 2 * k:
        raise ConfigError(f"--examples {n_examples} is too few for {k} clusters: use at least {2 * k}")
    started = time.time()
    run_dir = Path(run_dir)
    student_dir, student_manifest = verified_stage(run_dir, STUDENT_DIR, "pocketbert train distill")
    teacher_dir = recorded_path(run_dir, student_manifest.config.teacher or TEACHER_DIR)
    if not (teacher_dir / MANIFEST).is_file():
        teacher_dir = require_stage(run_dir, TEACHER_DIR, "pocketbert train teacher")
    read_verified_stage(teacher_dir)
    recipe = complete_recipe(student_manifest.config.recipe)
    seed = recipe.seed
    loaded = {"teacher": load_stage_model(teacher_dir), "student": load_stage_model(student_dir)}
    task, tokenizer = loaded["student"][2], loaded["student"][1]
    if task.per_token_outputs:
        raise ConfigError("inspect looks at sentence classifiers (embeddings coloured by label); this run is "
                          f"{task.name}: inspect a sentiment or emotion run")
    models = {role: (model, architecture_of(info)) for role, (model, _, _, info) in loaded.items()}
    datasets = datasets or [recorded_dataset(run_dir, recipe.dataset), *cross_domain_datasets(recipe)]
    max_length = int(loaded["student"][3]["max_length"])
    layer_map = cut_from(loaded["student"][3], loaded["student"][0], loaded["teacher"][0])
    result = {
        "schema": 1, "run": str(run_dir), "command": command_line(), "task": task.name,
        "label_names": task.label_names, "pooling": pooling, "clusters_k": k, "perplexity": perplexity, "seed": seed,
        "max_length": max_length,
        "models": {role: {"path": str(path), "architecture": models[role][1].name,
                          "description": models[role][1].describe(models[role][0]),
                          "attends": models[role][1].attends,
                          "embedding": models[role][1].embedding_name(pooling),
                          "hidden_size": getattr(models[role][0].config, "hidden_size", None)}
                   for role, path in (("teacher", teacher_dir), ("student", student_dir))},
        "layer_map": layer_map,
        "datasets": {},
    }
    with tqdm(total=len(datasets) * len(ROLES), desc="inspect", unit="model") as progress:
        for name in datasets:
            result["datasets"][name] = inspect_dataset(name, models, task, tokenizer, data_dir, n_examples, pooling,
                                                       k, perplexity, seed, max_length, progress, layer_map)
    result["wall_time_s"] = round(time.time() - started, 1)
    return result
