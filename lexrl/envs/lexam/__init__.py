"""LEXam law-exam answering (Fan et al. 2025): data in `data.py`, the MCQ reward in `reward.py`."""
