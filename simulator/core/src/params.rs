//! Named numeric parameters of policies and replica selectors.
//!
//! Every configurable part declares its parameters once, with [`params!`](crate::params!): the config struct's
//! fields, their defaults, their valid ranges (checked by `set`) and the range a tuner searches. The
//! declaration generates the struct, its `Default` and its [`Params`] implementation, so the catalogue
//! ([`Params::SPECS`]), the parser ([`Params::set`]) and the report ([`Params::params`]) cannot drift apart.
use crate::error::SimError;

/// What values a parameter takes within its range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Domain {
    /// Any finite number in range.
    Real,
    /// A whole number in range; a fraction is an error.
    Integer,
    /// Any number in range, rounded to the nearest whole number (counts given loosely, 0/1 switches).
    Rounded,
}

/// The range a tuner searches for a parameter (the tuner may narrow or widen it from the data).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Search {
    /// Not searched: the tuner keeps the default.
    Fixed,
    /// `lo..=hi`; `step` > 0 makes it a grid (0 = continuous); `log` samples on a log scale; `integer` asks for
    /// whole numbers.
    Range {
        lo: f64,
        hi: f64,
        step: f64,
        log: bool,
        integer: bool,
    },
    /// One of these values.
    Choices(&'static [f64]),
}

impl Search {
    /// Whole numbers `lo..=hi`.
    pub const fn int(lo: i64, hi: i64) -> Search {
        Search::Range {
            lo: lo as f64,
            hi: hi as f64,
            step: 0.0,
            log: false,
            integer: true,
        }
    }
    /// Whole numbers `lo..=hi` on a log scale.
    pub const fn int_log(lo: i64, hi: i64) -> Search {
        Search::Range {
            lo: lo as f64,
            hi: hi as f64,
            step: 0.0,
            log: true,
            integer: true,
        }
    }
    /// `lo..=hi` in steps of `step`.
    pub const fn grid(lo: f64, hi: f64, step: f64) -> Search {
        Search::Range {
            lo,
            hi,
            step,
            log: false,
            integer: false,
        }
    }
}

/// One parameter: name, meaning, default, valid range and search range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ParamSpec {
    pub name: &'static str,
    /// What the parameter means (the field's doc comment).
    pub doc: &'static str,
    pub default: f64,
    /// Valid range, inclusive.
    pub lo: f64,
    pub hi: f64,
    pub domain: Domain,
    /// The valid range as the error messages state it, e.g. `integer in 1..=64`.
    pub valid: &'static str,
    pub search: Search,
}

impl ParamSpec {
    /// The value to store for `v`, or the error naming the parameter and its valid range.
    pub fn check(&self, v: f64) -> Result<f64, SimError> {
        crate::error::check_range(self.name, v, self.lo, self.hi, self.valid)?;
        match self.domain {
            Domain::Real => Ok(v),
            Domain::Integer if v.fract() != 0.0 => Err(SimError::param(self.name, v, self.valid)),
            Domain::Integer => Ok(v),
            Domain::Rounded => Ok(v.round()),
        }
    }
}

/// Per-part parameter handling: defaults, named setters with range checks, and the values actually used.
/// Implemented by [`params!`](crate::params!).
pub trait Params: Sized + Default {
    /// What the parameters belong to, for messages: `policy 'rein'`, `replica selector 'ds'`.
    const OWNER: &'static str;
    /// Every parameter, in declaration order.
    const SPECS: &'static [ParamSpec];
    /// Sets one parameter; unknown names and out-of-range values are errors naming the parameter.
    fn set(&mut self, name: &str, value: f64) -> Result<(), SimError>;
    /// Checks cross-parameter constraints.
    fn validate(&self) -> Result<(), SimError>;
    /// Every parameter with the value in use, in declaration order.
    fn params(&self) -> Vec<(&'static str, f64)>;
}

/// The error for a parameter name `owner` does not have: names every valid parameter with its range.
pub fn unknown(owner: &str, name: &str, specs: &[ParamSpec]) -> SimError {
    let valid = if specs.is_empty() {
        "none (it has no parameters)".to_string()
    } else {
        specs
            .iter()
            .map(|s| format!("{} ({})", s.name, s.valid))
            .collect::<Vec<_>>()
            .join(", ")
    };
    SimError::UnknownParam {
        owner: owner.to_string(),
        name: name.to_string(),
        valid,
    }
}

/// Conversion of a checked parameter value to a config field and back.
pub trait ParamValue: Copy {
    fn from_param(v: f64) -> Self;
    fn to_param(self) -> f64;
}

impl ParamValue for f64 {
    #[inline]
    fn from_param(v: f64) -> Self {
        v
    }
    #[inline]
    fn to_param(self) -> f64 {
        self
    }
}

impl ParamValue for u32 {
    #[inline]
    fn from_param(v: f64) -> Self {
        v as u32
    }
    #[inline]
    fn to_param(self) -> f64 {
        self as f64
    }
}

/// Declares a config struct and its parameters; generates the struct, `Default` and [`Params`].
///
/// ```ignore
/// params! {
///     /// Doc of the config.
///     pub struct ReinConfig for "policy 'rein'" {
///         /// Number of queues K.
///         k: u32 = 4, Integer(1.0, 64.0, "integer in 1..=64"), Search::int(2, 8);
///         ...
///     }
///     validate = rein_validate;   // optional: fn(&ReinConfig) -> Result<(), SimError>
/// }
/// ```
/// Each field line: `name: type = default, Domain(lo, hi, "valid range as stated in errors"), search range;`
/// (`type` is `f64` or `u32`; the doc comment becomes [`ParamSpec::doc`]).
#[macro_export]
macro_rules! params {
    (@validate $this:ident $validate:path) => { $validate($this) };
    (@validate $this:ident) => {{ let _ = $this; Ok(()) }};
    (
        $(#[$meta:meta])*
        pub struct $name:ident for $owner:literal {
            $(
                $(#[doc = $doc:expr])*
                $field:ident : $ty:ty = $default:expr , $domain:ident ( $lo:expr , $hi:expr , $valid:expr ) , $search:expr ;
            )*
        }
        $(validate = $validate:path ;)?
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq)]
        pub struct $name {
            $(
                $(#[doc = $doc])*
                pub $field: $ty,
            )*
        }

        impl Default for $name {
            fn default() -> Self {
                $name { $( $field: $default, )* }
            }
        }

        impl $crate::params::Params for $name {
            const OWNER: &'static str = $owner;
            const SPECS: &'static [$crate::params::ParamSpec] = &[
                $(
                    $crate::params::ParamSpec {
                        name: stringify!($field),
                        doc: concat!($($doc, )* ""),
                        default: $default as f64,
                        lo: $lo,
                        hi: $hi,
                        domain: $crate::params::Domain::$domain,
                        valid: $valid,
                        search: $search,
                    },
                )*
            ];

            #[allow(unused_variables)]
            fn set(&mut self, name: &str, value: f64) -> Result<(), $crate::error::SimError> {
                let Some(spec) = Self::SPECS.iter().find(|s| s.name == name) else {
                    return Err($crate::params::unknown(Self::OWNER, name, Self::SPECS));
                };
                let v = spec.check(value)?;
                $(
                    if name == stringify!($field) {
                        self.$field = <$ty as $crate::params::ParamValue>::from_param(v);
                    }
                )*
                Ok(())
            }

            fn validate(&self) -> Result<(), $crate::error::SimError> {
                let this = self;
                $crate::params!(@validate this $($validate)?)
            }

            fn params(&self) -> Vec<(&'static str, f64)> {
                vec![ $( (stringify!($field), <$ty as $crate::params::ParamValue>::to_param(self.$field)), )* ]
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::params! {
        /// A toy config.
        pub struct Toy for "policy 'toy'" {
            /// Queues.
            k: u32 = 4, Integer(1.0, 64.0, "integer in 1..=64"), Search::int(2, 8);
            /// Window.
            window: f64 = 10.0, Rounded(1.0, 100.0, "1..=100 samples"), Search::Fixed;
            /// Scale.
            scale: f64 = 1.0, Real(0.5, 2.0, "[0.5, 2]"), Search::grid(0.5, 2.0, 0.25);
        }
    }

    #[test]
    fn declared_fields_parse_check_and_report() {
        let mut t = Toy::default();
        assert_eq!(
            t.params(),
            vec![("k", 4.0), ("window", 10.0), ("scale", 1.0)]
        );
        t.set("k", 6.0).unwrap();
        t.set("window", 10.4).unwrap();
        assert_eq!((t.k, t.window), (6, 10.0));
        let e = t.set("k", 2.5).unwrap_err().to_string();
        assert_eq!(
            e,
            "parameter 'k' = 2.5 is out of range: valid integer in 1..=64"
        );
        let e = t.set("scale", 3.0).unwrap_err().to_string();
        assert_eq!(e, "parameter 'scale' = 3 is out of range: valid [0.5, 2]");
        let e = t.set("K", 1.0).unwrap_err().to_string();
        assert_eq!(
            e,
            "unknown parameter 'K' for policy 'toy': valid k (integer in 1..=64), window (1..=100 samples), \
             scale ([0.5, 2])"
        );
        assert_eq!(Toy::SPECS[0].doc.trim(), "Queues.");
        assert_eq!(Toy::SPECS[2].search, Search::grid(0.5, 2.0, 0.25));
    }
}
