"""The pure scheduling core, shared by the live rounds and the what-if simulator.

Standard library, numpy and scipy only: no Django, Celery, Dash or Plotly, no I/O and
no clock (``tests/core/test_purity.py`` enforces the imports). See DESIGN.md.
"""
