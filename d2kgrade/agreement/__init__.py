"""Inter-rater agreement: how far the grades can be trusted.

The input is the long ratings table of :mod:`d2kgrade.agreement.ratings` (from judge outputs or people); the
study (:func:`d2kgrade.agreement.study.run_agreement`) reports binary agreement per property and level (percent
agreement, prevalence, Cohen's kappa per pair with Gwet's AC1 beside it, Krippendorff's alpha and Fleiss' kappa),
agreement on 0-100 scores (ICC(2,1), ICC(3,1), Krippendorff's alpha interval, Spearman, Kendall, Bland-Altman),
precision/recall/F1 against a gold set, and a sampled judge's self-consistency, each with the scale it is read on.
"""
