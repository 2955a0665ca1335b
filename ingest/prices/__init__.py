"""Cloud price lists to the ``prices`` landing table: one parser class per format, in a registry.

Formats: ``aws`` (EC2 bulk offer file, JSON or CSV), ``gcp`` (Cloud Billing Catalog SKUs, composed
per machine shape), ``azure`` (Retail Prices API pages), ``csv`` (the project's own columns).
"""

from ingest.prices import aws, azure, gcp, own_csv  # noqa: F401  (importing registers the parsers)
from ingest.prices.base import (
    CAPACITY_TYPES,
    PriceParser,
    PriceRecord,
    get_parser,
    parser_formats,
    records_to_table,
    register_parser,
)
from ingest.prices.land import OPEN_END, PRICES_CLUSTER, PriceIngestResult, ingest_price_file, parse_price_file
from ingest.prices.missing import MissingPrice, missing_instance_types

__all__ = [
    "CAPACITY_TYPES",
    "OPEN_END",
    "PRICES_CLUSTER",
    "MissingPrice",
    "PriceIngestResult",
    "PriceParser",
    "PriceRecord",
    "get_parser",
    "ingest_price_file",
    "missing_instance_types",
    "parse_price_file",
    "parser_formats",
    "records_to_table",
    "register_parser",
]
