"""Prices and specs of EC2 instances, and which price applies to a run.

- table:   the built-in table (prices.toml, us-east-1, dated) merged with a user price file
- imds:    which instance are we on (IMDSv2, fails fast and quietly off EC2)
- live:    optional live on-demand/spot prices via boto3
- resolve: `resolve_price(...)` -> `PriceInfo`, the price of this run and its one-line note
- peaks:   `peak_flops(core_version, dtype, lnc=...)` -> `PeakFlops` (core_peaks.toml, dated and
           sourced) and `flops_utilization(measured, peak)`

compare's what-if prices (--price, --region, --spot) work on its sessions: they live in
neurotui/compare/whatif.py, as pricing/ imports nothing of compare.

Import the module needed: this package imports none of them, so that peaks (the accelerator
panel's figures) loads without the others (IMDS's HTTP client, the price table: 27 ms).
"""
