"""The autoencoder's training settings (Johnson et al. 2018, section 2.7), without torch.

`engine.labs.vae` trains the model and re-exports these; the run settings (`engine.study.runs`), the
CLI and the pages build a `VAEConfig` without importing torch. What each field covers, and what the
paper leaves open, is in `engine.labs.vae`'s docstring.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from engine.io.errors import UserError

LATENT_MIN, LATENT_MAX, PAPER_LATENT = 2, 64, 16
LatentRelease = Literal["mean", "sampled"]
LATENT_RELEASES: tuple[LatentRelease, ...] = get_args(LatentRelease)


class VAEConfigError(UserError, ValueError):
    """A training setting is out of range; the message names it and what is allowed."""


@dataclass(frozen=True)
class VAEConfig:
    """Training parameters (all part of the cache key of a trained model)."""

    latent_dim: int = PAPER_LATENT
    hidden: int = 128
    epochs: int = 10
    batch_size: int = 256
    learning_rate: float = 2e-3
    validation_share: float = 0.2
    max_train_days: int = 20_000
    max_validation_days: int = 5_000
    seed: int = 0
    release: LatentRelease = "mean"  # encoder means, or one draw z ~ N(mu, sigma) per patient-day

    def __post_init__(self) -> None:
        if self.release not in LATENT_RELEASES:
            raise VAEConfigError(f"release must be one of {', '.join(LATENT_RELEASES)}, not {self.release!r}")
        if not LATENT_MIN <= self.latent_dim <= LATENT_MAX:
            raise VAEConfigError(
                f"latent size must be between {LATENT_MIN} and {LATENT_MAX}, not {self.latent_dim}"
            )
        if self.epochs < 1 or self.batch_size < 1 or self.hidden < 1:
            raise VAEConfigError("epochs, batch size and hidden units must be at least 1")
        if not 0 < self.validation_share < 1:
            raise VAEConfigError("validation share must be between 0 and 1")
        if self.max_train_days < 1 or self.max_validation_days < 1:
            raise VAEConfigError("training and validation days must be at least 1")
        if self.seed < 0:
            raise VAEConfigError(f"seed must be a non-negative integer, not {self.seed}")
