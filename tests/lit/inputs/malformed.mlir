func.func @test_malformed(%x: !kiln.ptr<f32>) {
  %0 = kiln.make_range 0 to : tensor<4xi32>
  return
}
