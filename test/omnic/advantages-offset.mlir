// group_advantages on rewards that share a large offset, compiled (omnic +
// omnirun) and on the reference evaluator, against the f64 formula to 1e-6.
// The group mean used to be rounded to f32 before the subtraction: for
// rewards 1000 + 0.01 i the compiled advantages were 40% off, and 2e-5..5e-5
// off for JPEG-sized rewards (-bytes / 500000).
//
// %want is the f64 formula on the f32 rewards (numpy, float64):
//   r = np.float32(rewards).astype(np.float64); rg = r.reshape(-1, 8)
//   want = (rg - rg.mean(1, keepdims=True)) / (std + 1e-4)
// with std = r.std() (global_std) or rg.std(1, keepdims=True) (per group).
// Each function returns max |a - want| and whether it is <= 1e-6.
//
// DEFINE: %{offset} = 1000,1000.01,1000.02,1000.03,1000.04,1000.05,1000.06,1000.07,1000.08,1000.09,1000.1,1000.11,1000.12,1000.13,1000.14,1000.15
// DEFINE: %{offset_global} = -0.75768690164394126,-0.54101619219388664,-0.3243454827438319,-0.10767477329377718,0.10767477329377718,0.3243454827438319,0.54101619219388664,0.75768690164394126,-0.75735661092831619,-0.54068590147826145,-0.32533635489070711,-0.10866564544065244,0.10800506400940227,0.32467577345945697,0.54134648290951171,0.75801719235956633
// DEFINE: %{offset_group} = -1.5213281028270489,-1.0862839722888868,-0.65123984175072458,-0.21619571121256231,0.21619571121256231,0.65123984175072458,1.0862839722888868,1.5213281028270489,-1.5202248089774286,-1.0853065906219148,-0.65304031262222728,-0.21812209426671347,0.21679612408880033,0.65171434244431414,1.086632560799828,1.5215507791553418
// The byte counts 1600 + (37 i mod 23) over 500000.
// DEFINE: %{jpeg} = -0.0032,-0.003228,-0.00321,-0.003238,-0.00322,-0.003202,-0.00323,-0.003212,-0.00324,-0.003222,-0.003204,-0.003232,-0.003214,-0.003242,-0.003224,-0.003206
// DEFINE: %{jpeg_global} = 0.15420114826892345,-0.092519868329163216,0.066085766776579236,-0.18063524982150742,-0.022029614715764971,0.1365780719704546,-0.11014294462763205,0.048462690478110394,-0.14979486629918695,0.0088107688065554995,0.16741845549277506,-0.079302561105311586,0.079303074000430865,-0.1674179425976558,-0.00881230749191334,0.14979537919430622
// DEFINE: %{jpeg_group} = 0.15504000061262652,-0.093023175271156069,0.066445272532329305,-0.18161790335145328,-0.022149455547967902,0.13732105499656708,-0.11074212088721552,0.048726326916269866,-0.14974297571183279,0.0088077166594445269,0.16736045990050896,-0.079275089826915279,0.079275602544362042,-0.16735994718306219,-0.0088092548117848554,0.14974348842927956
//
// RUN: omnic %s -o %t.bin
// RUN: omnirun %t.bin --function=global --input=16xf32=%{offset} --input=16xf64=%{offset_global} | FileCheck %s
// RUN: omnirun %t.bin --function=group --input=16xf32=%{offset} --input=16xf64=%{offset_group} | FileCheck %s
// RUN: omnirun %t.bin --function=global --input=16xf32=%{jpeg} --input=16xf64=%{jpeg_global} | FileCheck %s
// RUN: omnirun %t.bin --function=group --input=16xf32=%{jpeg} --input=16xf64=%{jpeg_group} | FileCheck %s
// RUN: omni-eval %s --function=global --input=16xf32=%{offset} --input=16xf64=%{offset_global} | FileCheck %s
// RUN: omni-eval %s --function=group --input=16xf32=%{offset} --input=16xf64=%{offset_group} | FileCheck %s
// RUN: omni-eval %s --function=global --input=16xf32=%{jpeg} --input=16xf64=%{jpeg_global} | FileCheck %s
// RUN: omni-eval %s --function=group --input=16xf32=%{jpeg} --input=16xf64=%{jpeg_group} | FileCheck %s
//

// CHECK: result[1]: tensor<i1>=1

func.func @global(%r: tensor<16xf32>, %want: tensor<16xf64>) -> (tensor<f64>, tensor<i1>) {
  %a = omni.group_advantages %r {group_size = 8} : tensor<16xf32>
  %err, %ok = call @check(%a, %want) : (tensor<16xf32>, tensor<16xf64>) -> (tensor<f64>, tensor<i1>)
  return %err, %ok : tensor<f64>, tensor<i1>
}

func.func @group(%r: tensor<16xf32>, %want: tensor<16xf64>) -> (tensor<f64>, tensor<i1>) {
  %a = omni.group_advantages %r {group_size = 8, global_std = false} : tensor<16xf32>
  %err, %ok = call @check(%a, %want) : (tensor<16xf32>, tensor<16xf64>) -> (tensor<f64>, tensor<i1>)
  return %err, %ok : tensor<f64>, tensor<i1>
}

func.func private @check(%a: tensor<16xf32>, %want: tensor<16xf64>) -> (tensor<f64>, tensor<i1>) {
  %a64 = omni.cast %a : tensor<16xf32> -> tensor<16xf64>
  %d = omni.sub %a64, %want : tensor<16xf64>
  %ad = omni.abs %d : tensor<16xf64>
  %m = omni.reduce max %ad dims = [0] : tensor<16xf64> -> tensor<f64>
  %tol = omni.constant dense<1.0e-6> : tensor<f64>
  %ok = omni.compare le, %m, %tol : tensor<f64>
  return %m, %ok : tensor<f64>, tensor<i1>
}
