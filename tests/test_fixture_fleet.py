import duckdb


def test_fleet_builds(fleet):
    con = duckdb.connect(str(fleet.warehouse), read_only=True)
    n = con.execute("select count(*) from fct_showback_daily").fetchone()[0]
    b = con.execute("select count(*) from fct_bill_reconciliation_daily").fetchone()[0]
    assert n > 0 and b > 0
