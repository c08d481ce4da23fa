"""Lab orders (Johnson et al. 2018): how identifying they are, and the latent release.

- `reident`: lab-set uniqueness and one-day re-identification, Recall@n (sections 2.2-2.6, Figures 3-4)
- `vae`: the variational autoencoder whose latent variables are released (section 2.7, Figures 5-6);
  imports torch, so only where a model is trained
"""
