// RUN: kiln-opt %s -convert-kiln-to-cpu -verify-diagnostics

// Program ids must have been turned into arguments first.
func.func @test_not_grid_ops() -> i32 {
  // expected-error @+1 {{must be lowered by -kiln-cpu-grid-args}}
  %p = kiln.program_id 0 : i32
  return %p : i32
}
