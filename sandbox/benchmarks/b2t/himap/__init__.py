"""B2T's HiMAP domain: task tuple, day slots, Σ pricing and the scripted team expert."""
