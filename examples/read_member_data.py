# The data a command member is handed (README "Command members"): plain float32 .npy files.
import os, numpy as np
x, y = np.load(os.environ["ENSEMBLED_TRAIN_X"]), np.load(os.environ["ENSEMBLED_TRAIN_Y"])        # [n, f], [n]
val_x, val_y = np.load(os.environ["ENSEMBLED_VAL_X"]), np.load(os.environ["ENSEMBLED_VAL_Y"])    # this member's validation rows
holdout_x, pool_x = np.load(os.environ["ENSEMBLED_HOLDOUT_X"]), np.load(os.environ["ENSEMBLED_POOL_X"])  # predict these
