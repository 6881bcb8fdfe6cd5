"""The hashed embedding lookup (custom op and composite) and FAIR's helpers."""

from tff_rec.ops.hashed_embedding import hashed_embedding_lookup
from tff_rec.ops.subspaces import project
from tff_rec.ops.subspaces import recover
