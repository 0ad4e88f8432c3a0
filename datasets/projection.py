"""Lon/lat -> planar km, once per dataset, so every strategy works in the papers' kilometres.

Equirectangular about the bounding-box centre: exact along the central meridian and parallel,
distorting east-west distances by cos(lat)/cos(lat0) elsewhere (under 10% over a US-sized extent's
core, more near its north/south edges). Longitudes are not wrapped: a dataset crossing the
antimeridian gets a too-wide extent (documented limitation).
"""

from __future__ import annotations

import numpy as np

EARTH_RADIUS_KM = 6371.0088  # mean Earth radius (IUGG)


def bbox_centre(lon, lat) -> tuple[float, float]:
    lon = np.asarray(lon, dtype=np.float64)
    lat = np.asarray(lat, dtype=np.float64)
    return float((lon.min() + lon.max()) / 2.0), float((lat.min() + lat.max()) / 2.0)


def project(lon, lat, lon0: float, lat0: float) -> tuple[np.ndarray, np.ndarray]:
    """x = R cos(lat0) (lon - lon0), y = R (lat - lat0), angles in radians, result in km."""
    lon = np.asarray(lon, dtype=np.float64)
    lat = np.asarray(lat, dtype=np.float64)
    x = EARTH_RADIUS_KM * np.cos(np.radians(lat0)) * np.radians(lon - lon0)
    y = EARTH_RADIUS_KM * np.radians(lat - lat0)
    return x, y


def unproject(x, y, lon0: float, lat0: float) -> tuple[np.ndarray, np.ndarray]:
    """Inverse of project (for plots and for generating lon/lat from km offsets)."""
    lon = lon0 + np.degrees(np.asarray(x, np.float64) / (EARTH_RADIUS_KM * np.cos(np.radians(lat0))))
    lat = lat0 + np.degrees(np.asarray(y, np.float64) / EARTH_RADIUS_KM)
    return lon, lat
