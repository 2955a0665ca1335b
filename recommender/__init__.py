"""The recommender: strategies (one typed class per kind), the consolidation packer, the
fragmentation measure, the warehouse loader and the recommendations store.

``recommender.engine.run(settings)`` is one run; everything under it but the loader and the store
is pure.
"""

from recommender.model import Recommendation, RecommenderInput, stable_id

__all__ = ["Recommendation", "RecommenderInput", "stable_id"]
