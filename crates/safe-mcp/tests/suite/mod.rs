//! Integration tests: the built binary, driven over stdio by a real MCP client.
mod approvals;
mod audit;
mod cli;
mod confinement;
mod egress;
mod files;
mod first_hour;
mod long_work;
mod privilege;
mod python_sdk;
mod round2_rules;
mod shipping;
mod support;
mod terminal;
mod toolchains;
mod tools;
mod view;
