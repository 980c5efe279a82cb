//! Arrays across the boundary: numpy arrays in through the buffer protocol (copied, or borrowed when read-only),
//! bytes out (native endianness, wrapped by numpy on the Python side), so no per-element Python objects are made.
use std::sync::Arc;

use pyo3::buffer::{Element, PyBuffer};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use kvsim_core::Column;

use crate::errors::WorkloadError;

pub(crate) fn vec_of<T: Element + Copy>(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    what: &str,
) -> PyResult<Vec<T>> {
    let buf: PyBuffer<T> = PyBuffer::get(obj).map_err(|e| {
        WorkloadError::new_err(format!(
            "{what}: expected a contiguous array of the right dtype ({e})"
        ))
    })?;
    buf.to_vec(py)
}

/// A column borrowed from a read-only, C-contiguous buffer of `obj` (no copy: the column holds the buffer).
pub(crate) fn column_of<T: Element + Copy + Send + Sync>(
    obj: &Bound<'_, PyAny>,
    what: &str,
) -> PyResult<Column<T>> {
    let buf: PyBuffer<T> = PyBuffer::get(obj).map_err(|e| {
        WorkloadError::new_err(format!(
            "{what}: expected a contiguous array of the right dtype ({e})"
        ))
    })?;
    if !buf.readonly() || !buf.is_c_contiguous() {
        return Err(WorkloadError::new_err(format!(
            "{what}: a borrowed array must be read-only and C-contiguous"
        )));
    }
    let (ptr, len) = (buf.buf_ptr() as *const T, buf.item_count());
    // SAFETY: the buffer is read-only and held by the column, so its memory stays valid and unchanged.
    Ok(unsafe { Column::borrowed(ptr, len, Arc::new(buf)) })
}

pub(crate) fn bytes_of<'py, T: Copy>(py: Python<'py>, v: &[T]) -> Bound<'py, PyBytes> {
    // SAFETY: plain-old-data numeric slices reinterpreted as bytes (native endianness, read by numpy).
    let b =
        unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) };
    PyBytes::new(py, b)
}
