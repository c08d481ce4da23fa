"""Variational autoencoder for lab orders (Johnson et al. 2018, section 2.7, Eq. 2, Figures 5-6).

Binary patient-day vectors (engine.labs.reident.PatientDays) go through an encoder to a latent Gaussian
(16 dimensions by default, 2-64 selectable), a decoder gives Bernoulli probabilities, and the loss is
binary cross-entropy plus the KL divergence to N(0, I) (Eq. 2), summed over labs and latent dimensions
and averaged over the days of a batch.

What the paper leaves open, and the settings that cover it (`VAEConfig`; bench/vae_variants.py
measures each on the sample):
- Architecture. Figure 2 is an image; the text says only "a variational autoencoder implemented in
  Keras", an encoder to a latent Gaussian and a generative decoder back to Bernoulli probabilities,
  with the loss of Eq. 2. Here one hidden ReLU layer of `hidden` units on each side (128 by default);
  `KERAS_EXAMPLE` is the Keras VAE example of that time (one Dense ReLU layer of 512 units each side,
  batch 128, Adam at 1e-3), the most likely reading of "standard".
- What is released. The paper does not say whether the released latent variables are the encoder
  means or draws z ~ N(mu, sigma) (a Keras VAE encoder outputs both). `release="mean"` (default,
  deterministic given the model) or `"sampled"` (one seeded draw per patient-day, the
  reparameterization of training).
- Latent size: 16 in the paper (2^1-2^3 "insufficiently accurate"); 2-64 here.
- Distance and query: as the paper, cosine distance between patient-day latent vectors, the breached
  day's own latent vector as the query (section 2.7: "the latent variables corresponding to that day").

The paper's direction does not reproduce on the shipped labs (issue #36, finding 1; every n judged by
`engine.labs.latent_verdict`, Holm over n = 1-99), nor on them once calibrated to Johnson's uniqueness
by days (finding 3: 53.3% / 74.9% / 98.3% unique overall, at >= 2 and >= 9 days). On those, seed 0,
100 simulations x 100 breached days (the paper's scale), raw Recall@1 / @10 24.9% / 52.8%
(bench/vae_variants.py): 16 dimensions, means 26.8% / 56.5%, significantly above raw at 87 of 99 n,
below at none; sampled 14.3% / 48.5%, below at 15 (n = 1-15), above at 62 (n between 21 and 86); the
Keras example (512 units) means above at 99 of 99; 32 sampled 5.7% / 36.7%, below at 29, above at 12;
4 (which the paper rejects) means 8.0% / 43.8%, below at 97, above at none; 2 means below at 92.
Why: at 16 dimensions the encoding is nearly lossless here (held-out ROC AUC 0.997, the paper's
0.94), and cosine on it weighs labs by what they tell apart rather than one each, as raw cosine
(Ochiai) does; re-weighting alone raises Recall@n the same way (raw vectors scaled by each lab's
log inverse day frequency, no model at all: Recall@10 61.1% against 53.2%, above raw at 82 of 99 n on
20 x 100 breached days, `bench/vae_variants.py --quick`).
Only a bottleneck that loses the day (2-4 dimensions) or the draw's noise lowers it, in none of these
runs at every n. So no release here is a mitigation on these data, and the defaults stay the paper's
(16, means): the verdict says so. The model was not tuned to the re-identification test.

Reconstruction quality (Figure 5) is the ROC AUC and PR AUC (average precision) of the decoded
probabilities against the held-out days' true 0/1 entries, every (day, lab) cell one prediction,
decoded from the encoder means (the model's quality); `release_roc_auc` / `release_pr_auc` decode the
released vectors themselves (equal for means; lower for sampled draws: what the release keeps).

Determinism: `torch.manual_seed(seed)`, `torch.use_deterministic_algorithms(True)`, one thread during
training and encoding (restored afterwards), a seeded generator for the split, batches and noise.
Speed: training uses at most `max_train_days` randomly chosen training days (the sample's 240,000 days
are subsampled) and the AUCs at most `max_validation_days` held-out days.

Importing this module imports torch: the app imports it only when the latent view is used.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.metrics import average_precision_score, precision_recall_curve, roc_auc_score, roc_curve
from torch import nn

from engine.io.progress import Progress
from engine.labs.reident import PatientDays
from engine.labs.vae_config import (  # noqa: F401  (re-exported: the config is torch-free)
    LATENT_MAX,
    LATENT_MIN,
    LATENT_RELEASES,
    PAPER_LATENT,
    LatentRelease,
    VAEConfig,
)

KERAS_EXAMPLE = VAEConfig(hidden=512, batch_size=128, learning_rate=1e-3)  # see the module docstring


class VAE(nn.Module):
    """Encoder x -> (mu, log sigma^2); decoder z -> Bernoulli logits (section 2.7, Figure 2)."""

    def __init__(self, n_labs: int, hidden: int, latent_dim: int) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(n_labs, hidden), nn.ReLU())
        self.mu = nn.Linear(hidden, latent_dim)
        self.logvar = nn.Linear(hidden, latent_dim)
        self.decoder = nn.Sequential(nn.Linear(latent_dim, hidden), nn.ReLU(), nn.Linear(hidden, n_labs))

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.encoder(x)
        return self.mu(h), self.logvar(h)

    def forward(
        self, x: torch.Tensor, noise: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        mu, logvar = self.encode(x)
        z = mu + noise * torch.exp(0.5 * logvar)  # reparameterization
        return self.decoder(z), mu, logvar


def vae_loss(logits: torch.Tensor, x: torch.Tensor, mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """Eq. 2: binary cross-entropy of the reconstruction plus KL(q(z|x) || N(0, I)), per day."""
    bce = nn.functional.binary_cross_entropy_with_logits(logits, x, reduction="sum")
    kl = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return (bce + kl) / x.shape[0]


@dataclass(frozen=True, eq=False)
class LatentModel:
    """A trained VAE with its evaluation (Figure 5) and the latent vector of every patient-day."""

    config: VAEConfig
    labs: np.ndarray
    state: dict[str, np.ndarray]  # model weights (numpy, so the object pickles without torch state)
    train_days: np.ndarray  # patient-day rows used for training
    validation_days: np.ndarray  # held-out rows used for the AUCs
    train_loss: np.ndarray  # per epoch, per day
    validation_loss: np.ndarray  # per epoch, per day
    roc_auc: float
    pr_auc: float  # average precision
    prevalence: float  # share of 1s among held-out cells (the PR curve's random line)
    roc: tuple[np.ndarray, np.ndarray]  # (false positive rate, true positive rate), thinned
    pr: tuple[np.ndarray, np.ndarray]  # (recall, precision), thinned
    latent: np.ndarray  # (n_days, latent_dim) the released vector of every patient-day (config.release)
    seconds: float
    latent_means: np.ndarray | None = (
        None  # (n_days, latent_dim) encoder means (the same as latent for "mean")
    )
    release_roc_auc: float = float("nan")  # held-out days decoded from their released vectors
    release_pr_auc: float = float("nan")

    def module(self) -> VAE:
        """The torch module with the trained weights."""
        model = VAE(len(self.labs), self.config.hidden, self.config.latent_dim)
        model.load_state_dict({k: torch.from_numpy(v) for k, v in self.state.items()})
        model.eval()
        return model

    def summary(self) -> dict[str, object]:
        return {
            **asdict(self.config),
            "labs": len(self.labs),
            "train_days": len(self.train_days),
            "validation_days": len(self.validation_days),
            "roc_auc": self.roc_auc,
            "pr_auc": self.pr_auc,
            "release_roc_auc": self.release_roc_auc,
            "release_pr_auc": self.release_pr_auc,
            "seconds": round(self.seconds, 2),
        }


@contextmanager
def deterministic(seed: int) -> Iterator[torch.Generator]:
    """Seeded, deterministic, single-threaded torch; restores the global settings afterwards."""
    threads = torch.get_num_threads()
    was_det = torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(seed)
    try:
        yield torch.Generator().manual_seed(seed)
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(was_det)


def _dense_rows(matrix: sp.csr_matrix, rows: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(matrix[rows].toarray().astype(np.float32))


def _thin(x: np.ndarray, y: np.ndarray, points: int = 400) -> tuple[np.ndarray, np.ndarray]:
    if len(x) <= points:
        return x, y
    keep = np.unique(np.linspace(0, len(x) - 1, points).round().astype(int))
    return x[keep], y[keep]


def split_days(n_days: int, config: VAEConfig) -> tuple[np.ndarray, np.ndarray]:
    """Seeded random split of patient-day rows: (training rows, held-out rows), each capped."""
    rng = np.random.default_rng(config.seed)
    order = rng.permutation(n_days)
    n_val = max(1, round(n_days * config.validation_share))
    val, train = order[:n_val], order[n_val:]
    return np.sort(train[: config.max_train_days]), np.sort(val[: config.max_validation_days])


def encode(model: VAE, matrix: sp.csr_matrix, batch: int = 8192) -> np.ndarray:
    """Encoder means for every row of `matrix` (n_days, latent_dim)."""
    return encode_both(model, matrix, batch)[0]


def encode_both(model: VAE, matrix: sp.csr_matrix, batch: int = 8192) -> tuple[np.ndarray, np.ndarray]:
    """Encoder means and standard deviations for every row of `matrix`, each (n_days, latent_dim)."""
    mus, sds = [], []
    with torch.no_grad():
        for s in range(0, matrix.shape[0], batch):
            x = torch.from_numpy(matrix[s : s + batch].toarray().astype(np.float32))
            mu, logvar = model.encode(x)
            mus.append(mu.numpy().astype(np.float64))
            sds.append(torch.exp(0.5 * logvar).numpy().astype(np.float64))
    if not mus:
        empty = np.zeros((0, model.mu.out_features))
        return empty, empty
    return np.concatenate(mus), np.concatenate(sds)


def sample_latent(means: np.ndarray, sds: np.ndarray, seed: int) -> np.ndarray:
    """One draw z = mu + sigma * eps per patient-day, eps ~ N(0, I) from `numpy.random.default_rng(seed)`
    (row order: the patient-day rows), so the same model and seed give the same release."""
    eps = np.random.default_rng(seed).standard_normal(means.shape)
    return means + sds * eps


def released_vectors(
    model: VAE, matrix: sp.csr_matrix, release: LatentRelease, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """(released vectors, encoder means) of every row of `matrix`: the means themselves, or one
    seeded draw from N(mu, sigma) per row (`sample_latent`, seed `seed + 1`, apart from training's)."""
    if release not in LATENT_RELEASES:
        raise ValueError(f"release must be one of {', '.join(LATENT_RELEASES)}, not {release!r}")
    means, sds = encode_both(model, matrix)
    return (means if release == "mean" else sample_latent(means, sds, seed + 1)), means


def train_vae(
    days: PatientDays, config: VAEConfig | None = None, progress: Progress | None = None
) -> LatentModel:
    """Train the VAE on a split of `days` (section 2.7), evaluate on held-out days (Figure 5) and
    encode every patient-day. `progress(fraction, message)` is called after each epoch."""
    config = config or VAEConfig()
    if days.n_days < 4:
        raise ValueError("the autoencoder needs at least a few patient-days to train on")
    start = time.perf_counter()
    matrix = days.matrix.tocsr()
    train_rows, val_rows = split_days(days.n_days, config)
    with deterministic(config.seed) as gen:
        x_train = _dense_rows(matrix, train_rows)
        x_val = _dense_rows(matrix, val_rows)
        model = VAE(days.n_labs, config.hidden, config.latent_dim)
        optimizer = torch.optim.Adam(model.parameters(), lr=config.learning_rate)
        train_loss, val_loss = [], []
        n = len(train_rows)
        for epoch in range(config.epochs):
            model.train()
            perm = torch.randperm(n, generator=gen)
            total = 0.0
            for s in range(0, n, config.batch_size):
                xb = x_train[perm[s : s + config.batch_size]]
                noise = torch.randn(xb.shape[0], config.latent_dim, generator=gen)
                logits, mu, logvar = model(xb, noise)
                loss = vae_loss(logits, xb, mu, logvar)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                total += loss.item() * xb.shape[0]
            train_loss.append(total / n)
            model.eval()
            with torch.no_grad():
                mu, logvar = model.encode(x_val)
                val_loss.append(float(vae_loss(model.decoder(mu), x_val, mu, logvar)))
            if progress:
                progress(
                    (epoch + 1) / (config.epochs + 1),
                    f"epoch {epoch + 1} of {config.epochs}: loss {train_loss[-1]:.2f} (held-out {val_loss[-1]:.2f})",
                )
        with torch.no_grad():
            mu, _ = model.encode(x_val)
            probs = torch.sigmoid(model.decoder(mu)).numpy().ravel()
        truth = x_val.numpy().ravel()
        latent, means = released_vectors(model, matrix, config.release, config.seed)
        with torch.no_grad():
            z_val = torch.from_numpy(latent[val_rows].astype(np.float32))
            release_probs = torch.sigmoid(model.decoder(z_val)).numpy().ravel()
        state = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    if truth.min() == truth.max():
        raise ValueError("held-out days are all 0 or all 1: nothing to evaluate the reconstruction on")
    fpr, tpr, _ = roc_curve(truth, probs)
    precision, recall, _ = precision_recall_curve(truth, probs)
    if progress:
        progress(1.0, "encoded every patient-day")
    return LatentModel(
        config=config,
        labs=days.labs,
        state=state,
        train_days=train_rows,
        validation_days=val_rows,
        train_loss=np.array(train_loss),
        validation_loss=np.array(val_loss),
        roc_auc=float(roc_auc_score(truth, probs)),
        pr_auc=float(average_precision_score(truth, probs)),
        prevalence=float(truth.mean()),
        roc=_thin(fpr, tpr),
        pr=_thin(recall[::-1], precision[::-1]),
        latent=latent,
        seconds=time.perf_counter() - start,
        latent_means=means,
        release_roc_auc=float(roc_auc_score(truth, release_probs)),
        release_pr_auc=float(average_precision_score(truth, release_probs)),
    )


def with_release(model: LatentModel, matrix: sp.csr_matrix, release: LatentRelease) -> LatentModel:
    """The same trained model releasing `release` instead (no retraining): its vectors and the
    held-out days' reconstruction from them."""
    config = replace(model.config, release=release)
    module = model.module()
    with deterministic(config.seed):
        latent, means = released_vectors(module, matrix, release, config.seed)
        x_val = _dense_rows(matrix.tocsr(), model.validation_days)
        with torch.no_grad():
            probs = torch.sigmoid(
                module.decoder(torch.from_numpy(latent[model.validation_days].astype(np.float32)))
            )
    truth = x_val.numpy().ravel()
    p = probs.numpy().ravel()
    return replace(
        model,
        config=config,
        latent=latent,
        latent_means=means,
        release_roc_auc=float(roc_auc_score(truth, p)),
        release_pr_auc=float(average_precision_score(truth, p)),
    )
