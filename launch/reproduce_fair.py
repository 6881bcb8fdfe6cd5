r"""Reproduces the shape of FAIR's Tables 2 and 3 on Goodreads-100 (NDCG@20).
Its flags and what it runs: experiments/papers/fair.py."""

from experiments.papers import fair
from launch import common

main = fair.main

if __name__ == '__main__':
  common.run(main)
