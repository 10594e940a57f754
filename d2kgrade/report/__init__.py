"""Reports: one self-contained HTML file (plots embedded as PNG) and a Markdown twin, from scores and agreement.

Start at :func:`d2kgrade.report.build.write_report`. Nothing here is imported by the CLI until a report is asked
for (matplotlib is slow to import).
"""
