r"""FAIR's headline cells on a second dataset: Amazon Beauty-100, NDCG@20.
Its flags and what it runs: experiments/papers/fair_beauty.py."""

from experiments.papers import fair_beauty
from launch import common

main = fair_beauty.main

if __name__ == '__main__':
  common.run(main)
