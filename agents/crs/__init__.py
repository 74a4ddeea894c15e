"""The movie recommender under preference shifts: the simulated user, the recommender and the PEPPER-style judge."""
