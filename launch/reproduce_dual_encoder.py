r"""Ning et al.'s Table 2 on MovieLens: centralized vs federated global recall@k
Its flags and what it runs: experiments/papers/dual_encoder.py."""

from experiments.papers import dual_encoder
from launch import common

main = dual_encoder.main

if __name__ == '__main__':
  common.run(main)
