"""The digits data set bundled with scikit-learn (1797 8x8 images, no download), split
into train and held-out sets reproducibly from a seed."""
from __future__ import annotations

import numpy as np

HELDOUT_FRACTION = 0.2


def load(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x_train, y_train, x_heldout, y_heldout): x float32 [n,1,8,8] in [0,1], y int64."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    data = load_digits()
    x = (data.images.astype(np.float32) / 16.0).reshape(-1, 1, 8, 8)
    y = data.target.astype(np.int64)
    # Stratified so that every class is in the held-out set in proportion, whatever the seed.
    x_tr, x_ho, y_tr, y_ho = train_test_split(x, y, test_size=HELDOUT_FRACTION, random_state=seed, stratify=y)
    return (np.ascontiguousarray(x_tr), np.ascontiguousarray(y_tr),
            np.ascontiguousarray(x_ho), np.ascontiguousarray(y_ho))
